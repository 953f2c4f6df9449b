"""Read-mostly pages: topic, consumer group, clusters, audit trail.

Pages read stored state only (no page view calls Kafka); what a topic is
on the broker now is read on demand through a worker (``topic_broker``). Every state-changing
route is POST-only, CSRF-protected, needs ``groups.manage_clusters`` (checked
again in the services they call, ``groups.services.clusters``, so no caller
can skip it), and redirects; the services write the audit rows. The lag
chart's geometry is ``groups.web.charts``; CSV downloads are
``groups.web.exports``.

Group ids, client ids, hosts and topic names are hostile text: templates rely
on autoescaping and nothing here marks data safe; the lag chart is SVG whose
only data-bearing parts are numbers and text nodes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponsePermanentRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from groups.domain.scopes import APPROVER, VIEWER
from groups.selectors.access import (
    scope_of,
    visible_audit_events,
    visible_clusters,
    visible_findings,
    visible_groups,
    visible_topics,
)
from groups.selectors.browse import (
    GROUP_SORTS,
    TOPIC_SORTS,
    audit_events_list,
    audit_filter_values,
    audit_object_names,
    group_chart_extent,
    group_chart_marks,
    group_lag_series,
    group_open_findings_list,
    groups_browse,
    topic_generations_list,
    topic_readers_list,
    topics_browse,
)
from groups.selectors.lists import clusters_list, clusters_with_certificates_list, groups_list, topics_list
from groups.models import AuditEvent, ConsumerGroup, PartitionGeneration, Topic
from groups.services.clusters import (
    MANAGE_PERMISSION,
    cluster_create,
    cluster_request_test,
    cluster_set_enabled,
    cluster_update,
    group_update_settings,
    require_manager,
)
from groups.selectors.expansion import expansion_jobs_visible
from groups.services.expansion.plan import ExpansionNotFound, expansion_plan, expansion_plan_as_dict
from groups.services.topic_state import topic_broker_state
from groups.text import partition_ranges
from groups.web.charts import (
    CHART_FIT,
    CHART_MAX_POINTS,
    CHART_MAX_TOPICS,
    CHART_WINDOWS,
    chart_window,
    fit_start,
    lag_chart,
    span_text,
)
from groups.web.links import group_url, topic_url
from groups.web.paging import KeysFirstPaginator
from groups.web.forms import AuditFilterForm, BrowseFilterForm, ClusterEnabledForm, ClusterForm, GroupSettingsForm

TOPIC_READERS_PER_PAGE = 100
BROWSE_PER_PAGE = 50
# Partitions shown per topic on a group page (a topic may have thousands).
GROUP_PARTITIONS_SHOWN = 1000
AUDIT_PER_PAGE = 50


# --- Presentation helpers (pure) ------------------------------------------


def generation_timeline(generations: Iterable[PartitionGeneration]) -> list[dict]:
    """One entry per generation (given oldest first), newest first: when the
    partition count changed and from what to what."""
    entries = []
    previous: PartitionGeneration | None = None
    for generation in generations:
        entries.append({
            "generation": generation,
            "from_count": None if previous is None else len(previous.partitions),
            "to_count": len(generation.partitions),
            "added": partition_ranges(generation.added_partitions),
            "removed": partition_ranges(generation.removed_partitions),
        })
        previous = generation
    return entries[::-1]


def _page_query(request: HttpRequest) -> str:
    """The request's query string without ``page``, for pager links."""
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


# --- Topic and group pages ------------------------------------------------


def _browse_list(request: HttpRequest, *, template: str, selector: Callable, visible: Callable, sorts: dict,
                 hidden: str) -> HttpResponse:
    """A searchable, sortable, paged list (groups or topics) of what the person's
    scope lets them read, without what ``hidden`` names (``gone`` groups,
    ``deleted`` topics) unless ``all`` asks for them, saying how many it hid;
    bad input is a 400 with the form's errors and no rows."""
    form = BrowseFilterForm(request.GET, sorts=sorts)
    valid = form.is_valid()
    scope = scope_of(request.user)
    if valid:
        filters = form.selector_filters()
        shown = {hidden: None} if form.shows_all() else {hidden: False}
        rows = visible(scope, selector(**filters, sort=form.sort_key(), **shown))
        hidden_count = 0 if form.shows_all() else visible(scope, selector(**filters, **{hidden: True})).count()
    else:
        filters, rows, hidden_count = {}, selector().none(), 0
    page = KeysFirstPaginator(rows, BROWSE_PER_PAGE).get_page(request.GET.get("page"))
    filtered = valid and any(filters.values())
    return render(request, template, {
        "form": form, "page": page, "page_query": _page_query(request), "filtered": filtered,
        "sorts": [(key, label) for key, (label, _) in sorts.items()], "sort": form.sort_key() if valid else "name",
        "shows_all": valid and form.shows_all(), "hidden_count": hidden_count,
        "show_hidden_query": _query_with(request, all="1"), "hide_hidden_query": _query_with(request, all=None),
        "clusters": visible_clusters(scope, clusters_list()).values_list("name", flat=True),
        # Only when the filter shows nothing: how many it hid.
        "hidden_total": visible(scope, selector()).count() if filtered and not page.object_list else 0,
    }, status=200 if valid else 400)


def _query_with(request: HttpRequest, **values: str | None) -> str:
    """The request's query string with ``values`` set (None: removed), back on page one."""
    query = request.GET.copy()
    query.pop("page", None)
    for name, value in values.items():
        query.pop(name, None)
        if value is not None:
            query[name] = value
    return query.urlencode()


@login_required
@require_http_methods(["GET", "HEAD"])
def group_list(request: HttpRequest) -> HttpResponse:
    return _browse_list(request, template="browse/groups.html", selector=groups_browse, visible=visible_groups,
                        sorts=GROUP_SORTS, hidden="gone")


@login_required
@require_http_methods(["GET", "HEAD"])
def topic_list(request: HttpRequest) -> HttpResponse:
    return _browse_list(request, template="browse/topics.html", selector=topics_browse, visible=visible_topics,
                        sorts=TOPIC_SORTS, hidden="deleted")


def _permanent_redirect(request: HttpRequest, url: str) -> HttpResponse:
    """A page that moved to ``url`` for good (an id URL to its name URL), its query kept."""
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{url}?{query}" if query else url)


def _visible_topic(request: HttpRequest, **lookup) -> Topic:
    return get_object_or_404(visible_topics(scope_of(request.user), topics_list()), **lookup)


def _shown_generation(request: HttpRequest, timeline: list[dict]) -> dict | None:
    """The timeline entry the page is about: ``?generation=N``, else the newest
    (None before the first); a number the topic never had is a 404."""
    text = request.GET.get("generation")
    if text is None:
        return timeline[0] if timeline else None
    for entry in timeline:
        if text.isascii() and text.isdigit() and int(text) == entry["generation"].number:
            return entry
    raise Http404("no such generation of this topic")


@login_required
@require_http_methods(["GET", "HEAD"])
def topic_detail(request: HttpRequest, cluster_name: str, topic_name: str) -> HttpResponse:
    scope = scope_of(request.user)
    topic = get_object_or_404(visible_topics(scope, topics_list()), cluster__name=cluster_name, name=topic_name)
    timeline = generation_timeline(topic_generations_list(topic=topic))
    shown = _shown_generation(request, timeline)
    for entry in timeline:
        entry["query"] = _query_with(request, generation=str(entry["generation"].number), partitions=None)
    readers = scope.rows(topic_readers_list(topic=topic), cluster="topic__cluster__name", group="group__group_id")
    readers = Paginator(readers, TOPIC_READERS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    planned, plan_error = _expansion_plan(request, topic)
    return render(request, "browse/topic.html", {
        "topic": topic, "timeline": timeline, "shown": shown, "current": timeline[0] if timeline else None,
        "readers": readers, "page_query": _page_query(request),
        "planned": planned, "plan_error": plan_error, "plan_partitions": request.GET.get("partitions", ""),
        "plan_fingerprint": expansion_plan_as_dict(planned)["fingerprint"] if planned else "",
        "expansions": expansion_jobs_visible(user=request.user).filter(topic=topic)[:10],
    }, status=400 if plan_error else 200)


@login_required
@require_http_methods(["GET", "HEAD"])
def topic_by_id(request: HttpRequest, topic_id: int) -> HttpResponse:
    """The topic page's address before names (bookmarks, old audit links): moved for good."""
    return _permanent_redirect(request, topic_url(_visible_topic(request, pk=topic_id)))


@login_required
@require_http_methods(["GET", "HEAD"])
def topic_broker(request: HttpRequest, cluster_name: str, topic_name: str) -> HttpResponse:
    """The topic on the broker now (partitions, replicas, offsets, sizes,
    configs), read on demand through a worker: the topic page fetches it as
    a fragment after it renders (``gapwatch/load.js``), or a person without
    scripts opens it as a page. A broker that does not answer is a sentence
    (status 200 in the fragment, so the page shows it; 502 as a page)."""
    topic = _visible_topic(request, cluster__name=cluster_name, name=topic_name)
    state = topic_broker_state(topic=topic)
    fragment = request.headers.get("X-Requested-With") == "fetch"
    status = 502 if state["error"] and not fragment else 200
    return render(request, "browse/_topic_broker.html" if fragment else "browse/topic_broker.html",
                  {"topic": topic, "state": state}, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def topic_broker_by_id(request: HttpRequest, topic_id: int) -> HttpResponse:
    topic = _visible_topic(request, pk=topic_id)
    return _permanent_redirect(request, reverse("browse:topic_broker", args=[topic.cluster.name, topic.name]))


def _expansion_plan(request: HttpRequest, topic) -> tuple[object | None, str]:
    """The plan of the count the form asked for (``?partitions=N``), or why
    there is none: a dry run, read from stored state plus the broker's verdict
    through a worker (groups.services.expansion.plan). Nothing changes."""
    text = request.GET.get("partitions")
    if text is None:
        return None, ""
    text = text.strip()
    partitions: object = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else text
    try:
        return expansion_plan(user=request.user, cluster=topic.cluster.name, topic=topic.name,
                              partitions=partitions, dry_run=True), ""
    except (ValidationError, ExpansionNotFound, PermissionDenied) as error:
        return None, " ".join(error.messages) if isinstance(error, ValidationError) else str(error)


def _topic_row(topic, group_topic, findings: list) -> dict:
    """One topic of a group page: every partition the last poll stored for the
    group (``GroupTopic.partitions``), each with its open findings; a partition
    with a finding but no stored row (a topic the group no longer reports, or
    stored before partitions were) shows the finding's own offsets."""
    by_partition: dict[int, list] = {}
    for finding in findings:
        by_partition.setdefault(finding.partition, []).append(finding)
    stored = {row["partition"]: row for row in (group_topic.partitions if group_topic else [])}
    for partition, rows in by_partition.items():
        if partition not in stored:
            latest = rows[-1]
            stored[partition] = {
                "partition": partition, "committed": latest.committed_offset, "high_watermark": latest.high_watermark,
                "lag": latest.lag, "client_id": latest.owner_client_id, "host": latest.owner_host,
            }
    partitions = [{**stored[p], "findings": by_partition.get(p, [])} for p in sorted(stored)]
    return {"topic": topic, "group_topic": group_topic, "findings": findings,
            "partitions": partitions[:GROUP_PARTITIONS_SHOWN], "more": max(0, len(partitions) - GROUP_PARTITIONS_SHOWN)}


def _group_page(request: HttpRequest, group: ConsumerGroup, settings_form: GroupSettingsForm | None,
                status: int = 200) -> HttpResponse:
    group_topics = list(group.group_topics.all())
    findings_by_topic: dict[int, list] = {}
    for finding in visible_findings(scope_of(request.user), group_open_findings_list(group=group)):
        findings_by_topic.setdefault(finding.topic_id, []).append(finding)
    # A topic with open findings the group no longer reports still gets its rows.
    topic_rows = [_topic_row(gt.topic, gt, findings_by_topic.pop(gt.topic_id, [])) for gt in group_topics]
    topic_rows += [_topic_row(rows[0].topic, None, rows) for rows in findings_by_topic.values()]

    window = chart_window(request.GET.get("window"))
    end = timezone.now()
    charted = sorted(group_topics, key=lambda gt: (-gt.lag, gt.topic.name))[:CHART_MAX_TOPICS]
    if window == CHART_FIT:
        first_event, first_sample = group_chart_extent(
            group=group, topic_ids=[gt.topic_id for gt in charted],
            since=end - timedelta(hours=max(CHART_WINDOWS.values())))
        start = fit_start(now=end, first_event=first_event, first_sample=first_sample)
        window_label = f"last {span_text(end - start)}, fitted to its events"
    else:
        start = end - timedelta(hours=CHART_WINDOWS[window])
        window_label = f"last {window}"
    samples = group_lag_series(group=group, topic_ids=[gt.topic_id for gt in charted], start=start,
                                         end=end, buckets=CHART_MAX_POINTS)
    marks = group_chart_marks(group=group, topics=[gt.topic for gt in charted], start=start, end=end)
    chart = lag_chart(series=[(gt.topic.name, samples.get(gt.topic_id, [])) for gt in charted], start=start, end=end,
                      marks=marks)

    can_manage = request.user.has_perm(MANAGE_PERMISSION) and scope_of(request.user).may(
        APPROVER, cluster=group.cluster.name, group=group.group_id) is not None
    if settings_form is None and can_manage:
        settings_form = GroupSettingsForm(instance=group)
    return render(request, "browse/group.html", {
        "group": group, "topic_rows": topic_rows, "total_lag": sum(gt.lag for gt in group_topics),
        "chart": chart, "window": window, "windows": [CHART_FIT, *CHART_WINDOWS], "window_label": window_label,
        "charted_count": len(charted),
        "topic_count": len(group_topics), "max_points": CHART_MAX_POINTS, "max_partitions": GROUP_PARTITIONS_SHOWN,
        "can_manage": can_manage, "settings_form": settings_form,
    }, status=status)


def _visible_group(request: HttpRequest, **lookup) -> ConsumerGroup:
    return get_object_or_404(visible_groups(scope_of(request.user), groups_list(with_partitions=True)), **lookup)


@login_required
@require_http_methods(["GET", "HEAD"])
def group_detail(request: HttpRequest, cluster_name: str, group_id: str) -> HttpResponse:
    return _group_page(request, _visible_group(request, cluster__name=cluster_name, group_id=group_id), None)


@login_required
@require_http_methods(["GET", "HEAD"])
def group_by_id(request: HttpRequest, group_pk: int) -> HttpResponse:
    """The group page's address before names (bookmarks, old audit links): moved for good."""
    group = get_object_or_404(visible_groups(scope_of(request.user), groups_list()), pk=group_pk)
    return _permanent_redirect(request, group_url(group))


def _manager_only(*methods: str) -> Callable[[Callable], Callable]:
    """Login (anonymous: to the login page), then the HTTP methods (405),
    then the permission (403). CSRF is checked by the middleware before all
    of it."""

    def decorate(view: Callable) -> Callable:
        @login_required
        @require_http_methods(list(methods))
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            require_manager(request.user)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


# A write; a page with a form (GET shows it, POST saves).
_manager_post = _manager_only("POST")
_manager_form_view = _manager_only("GET", "HEAD", "POST")


@login_required
@require_http_methods(["POST"])
def group_settings(request: HttpRequest, group_pk: int) -> HttpResponse:
    """A group's settings: an approver whose scope covers the group."""
    group = _visible_group(request, pk=group_pk)
    require_manager(request.user, group=group)
    # A copy: the page shows the stored settings next to the rejected input.
    form = GroupSettingsForm(request.POST, instance=copy.copy(group))
    if not form.is_valid():
        return _group_page(request, group, form, status=400)
    changed = group_update_settings(user=request.user, group_id=group.pk, data=form.cleaned_data)
    messages.success(request, "Group settings saved." if changed else "Nothing changed.")
    return redirect(group_url(group))


# --- Clusters -------------------------------------------------------------


def _clusters_page(request: HttpRequest, *, name: str | None) -> HttpResponse:
    """Every cluster the person's scope shows, or the one called ``name`` (404 if none)."""
    scope = scope_of(request.user)
    clusters = [cluster for cluster in clusters_with_certificates_list(
        now=timezone.now(), within_days=settings.CERTIFICATE_EXPIRY_WARNING_DAYS)
        if scope.may(VIEWER, cluster=cluster.name) is not None and name in (None, cluster.name)]
    if name is not None and not clusters:
        raise Http404("no such cluster")
    return render(request, "browse/clusters.html", {
        "clusters": clusters, "cluster": clusters[0] if name is not None else None,
        "can_manage": request.user.has_perm(MANAGE_PERMISSION) and scope.manages_clusters,
        "expiry_warning_days": settings.CERTIFICATE_EXPIRY_WARNING_DAYS,
        "poll_interval_ms": settings.POLL_INTERVAL_SECONDS * 1000,
    })


@login_required
@require_http_methods(["GET", "HEAD"])
def cluster_list(request: HttpRequest) -> HttpResponse:
    return _clusters_page(request, name=None)


@login_required
@require_http_methods(["GET", "HEAD"])
def cluster_detail(request: HttpRequest, cluster_name: str) -> HttpResponse:
    return _clusters_page(request, name=cluster_name)


@_manager_form_view
def cluster_add(request: HttpRequest) -> HttpResponse:
    form = ClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        cluster = cluster_create(user=request.user, data=form.cleaned_data, secrets=form.secrets)
        messages.success(request, f"Cluster {cluster.name} added.")
        return redirect("browse:clusters")
    status = 400 if request.method == "POST" else 200
    return render(request, "browse/cluster_form.html", {"form": form, "cluster": None}, status=status)


@_manager_form_view
def cluster_edit(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(clusters_list(), pk=pk)
    form = ClusterForm(request.POST or None, instance=cluster)
    if request.method == "POST" and form.is_valid():
        changed = cluster_update(user=request.user, cluster_id=cluster.pk, data=form.cleaned_data,
                                 secrets=form.secrets, clear=form.cleared)
        messages.success(request, f"Cluster {cluster.name} saved." if changed else "Nothing changed.")
        return redirect("browse:clusters")
    status = 400 if request.method == "POST" else 200
    return render(request, "browse/cluster_form.html", {"form": form, "cluster": cluster}, status=status)


@_manager_post
def cluster_toggle(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(clusters_list(), pk=pk)
    form = ClusterEnabledForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("enabled must be true or false")
    enabled = form.cleaned_data["enabled"]
    changed = cluster_set_enabled(user=request.user, cluster_id=cluster.pk, enabled=enabled)
    state = "enabled" if enabled else "disabled"
    messages.success(request, f"Cluster {cluster.name} {state}." if changed else f"Cluster {cluster.name} was "
                                                                                 f"already {state}.")
    return redirect("browse:clusters")


@_manager_post
def cluster_test(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(clusters_list(), pk=pk)
    cluster_request_test(user=request.user, cluster_id=cluster.pk)
    messages.info(request, f"Connection test of {cluster.name} queued; reload this page in a few seconds for the "
                           "result.")
    return redirect("browse:clusters")


# --- Audit ----------------------------------------------------------------


def _object_links(events: list[AuditEvent]) -> None:
    """Sets each event's ``object_link``: its object's page, or "" when there
    is none (object ids are free text in the audit table: only all-digit ids
    of rows that still exist become links; topics, groups and clusters by name)."""
    wanted: dict[str, set[int]] = {}
    for event in events:
        if event.object_id.isdigit():
            wanted.setdefault(event.object_type, set()).add(int(event.object_id))
    names = audit_object_names(ids=wanted)
    routes = {"topic": "browse:topic", "group": "browse:group", "cluster": "browse:cluster"}
    by_id = {"job": "job_detail", "finding": "finding_detail", "expansion": "expansion_detail"}
    for event in events:
        event.object_link = ""
        if not event.object_id.isdigit():
            continue
        if event.object_type in routes:
            found = names[event.object_type].get(int(event.object_id))
            event.object_link = reverse(routes[event.object_type], args=found) if found else ""
        elif event.object_type in by_id:
            event.object_link = reverse(by_id[event.object_type], args=[int(event.object_id)])


@login_required
@require_http_methods(["GET", "HEAD"])
def audit_list(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    events = (visible_audit_events(scope_of(request.user), audit_events_list(**form.selector_filters()),
                                   user=request.user)
              if form.is_valid() else audit_events_list().none())
    page = Paginator(events, AUDIT_PER_PAGE).get_page(request.GET.get("page"))
    _object_links(list(page.object_list))
    return render(request, "browse/audit.html", {
        "form": form, "page": page, "page_query": _page_query(request), "suggestions": audit_filter_values(),
    }, status=200 if form.is_valid() else 400)
