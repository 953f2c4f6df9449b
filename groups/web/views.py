"""The operator's pages of findings: the triage (home), the per-partition
list and history, one finding (and its record viewer), and the header's
freshness. The approve flows are in ``approvals.py``, the jobs pages in
``jobs.py``.

Views are thin: they validate input, call one service or selector, and
redirect. They read stored state only; no page view calls Kafka. Every
state-changing view is POST-only; the services check permissions again.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from groups.selectors.expansion import expansions_adding_partition
from groups.selectors.access import actable_finding_ids, may_approve, scope_of, visible_clusters
from groups.selectors.finding import (
    finding_audit_events_list,
    finding_get,
    finding_group_members,
    finding_jobs_list,
    finding_record_counts,
    finding_urgency_shown,
)
from groups.selectors.lists import (
    clusters_list,
    findings_count_by_state_and_resolution,
    findings_list,
    findings_triage_groups,
    findings_triage_outline,
)
from groups.domain.group_kinds import GROUP_KINDS, KIND_LABELS
from groups.domain.triage import triage_slice
from groups.web.forms import FindingFilterForm
from groups.web.paging import KeysFirstPaginator
from groups.services.lifecycle import missed_range_of
from groups.services.previews import finding_repair_options
from groups.domain.record_display import MAX_RECORDS_PER_END
from groups.services import record_viewer
from groups.services.dispatch import QueueUnavailable, TaskTimedOut
from groups.models import Finding, RemediationJob
from groups.selectors.jobs import job_links

PAGE_SIZE = 50
TRIAGE_GROUPS_PER_PAGE = 50
# Sort keys a person can choose, and the columns they order by (stable with id).
SORTS = {
    "found": ("-created_at", "-id"),
    "-found": ("created_at", "id"),
    "lag": ("-lag", "-id"),
    "missed": ("-missed_definite", "-missed_possible", "-id"),
    "group": ("group__group_id", "topic__name", "partition", "id"),
    "topic": ("topic__name", "partition", "id"),
    "state": ("state", "-created_at", "id"),
}
# The triage's orders: most missed first, or soonest deleted by retention first (an estimate).
TRIAGE_SORTS = {"": "most missed first", "expires": "soonest deleted by retention first (estimate)"}
STATES = [choice for choice, _ in Finding.State.choices]
GROUP_KIND_CHOICES = [(kind, KIND_LABELS[kind]) for kind in GROUP_KINDS]
# The sortable columns of the per-partition list: the sort keys each offers
# (a second key is the reverse order, offered once the first is in force),
# and the direction each key orders the column in.
SORT_COLUMNS = {"topic": ("topic",), "group": ("group",), "found": ("found", "-found"), "lag": ("lag",),
                "missed": ("missed",), "state": ("state",)}
SORT_DIRECTIONS = {"found": "descending", "-found": "ascending", "lag": "descending", "missed": "descending",
                   "group": "ascending", "topic": "ascending", "state": "ascending"}


RESOLUTIONS = list(Finding.Resolution.values)


def _shown_job(finding: Finding) -> RemediationJob | None:
    """The Remediation column: the active job, else the latest one."""
    links = finding.job_links
    return next((link.job for link in links if link.active), links[0].job if links else None)


def findings_filtered(request: HttpRequest) -> tuple[FindingFilterForm, QuerySet[Finding], dict]:
    """The per-partition list as its page, refresh and downloads read it from
    the query string: open work (``view=partitions``), or with
    ``view=history`` every finding in any state; filtered and sorted. Returns
    the form, the findings (none when the form is invalid) and the selector
    filters used."""
    history = request.GET.get("view") == "history"
    form = FindingFilterForm(request.GET, history=history, sorts=SORTS)
    valid = form.is_valid()
    filters = form.selector_filters() if valid else {"state": None, "include_closed": history}
    findings = findings_list(**filters, scope=scope_of(request.user)).order_by(*SORTS[findings_sort(request)])
    return form, findings if valid else findings.none(), filters


def sort_columns(sort: str) -> dict[str, dict]:
    """Per sortable column: the key its link asks for, and its ``aria_sort``
    ("ascending", "descending" or "none"), so the header shows and announces
    the order in force."""
    columns = {}
    for column, keys in SORT_COLUMNS.items():
        active = sort in keys
        following = keys[(keys.index(sort) + 1) % len(keys)] if active else keys[0]
        columns[column] = {"key": following, "aria_sort": SORT_DIRECTIONS[sort] if active else "none"}
    return columns


def findings_sort(request: HttpRequest) -> str:
    sort = request.GET.get("sort", "found")
    return sort if sort in SORTS else "found"


def _findings_context(request: HttpRequest) -> tuple[dict, int]:
    """The per-partition table's context and status. Bad filters (a
    malformed date) are a 400 with the form's errors and no rows."""
    form, findings, filters = findings_filtered(request)
    valid, history, sort = form.is_valid(), form.history, findings_sort(request)
    # The job links of the whole page in one query, whatever the page size; the newest first.
    links = job_links()
    findings = findings.prefetch_related(Prefetch("job_findings", queryset=links, to_attr="job_links"))
    page = KeysFirstPaginator(findings, PAGE_SIZE).get_page(request.GET.get("page"))
    for finding in page.object_list:
        finding.shown_job = _shown_job(finding)
    scope = scope_of(request.user)
    open_counts, closed_counts = findings_count_by_state_and_resolution(
        findings_list(**{**filters, "state": None, "include_closed": True, "resolution": None}, scope=scope)
    )
    raw = _filter_values(form)
    filtered = {key: value for key, value in raw.items() if value}
    query = {"view": "history" if history else "partitions", **filtered}
    state_counts = [(state, open_counts.get(state, 0)) for state in STATES]
    return {
        "view": query["view"],
        "history": history,
        "form": form,
        "page": page,
        "filters": raw,
        "filtered": bool(filtered),
        # Only when the filters show nothing: how many findings they hid.
        "hidden_total": (findings_list(include_closed=history, scope=scope).count()
                         if filtered and not page.object_list else 0),
        "sort": sort,
        "sorts": list(SORTS),
        "columns": sort_columns(sort),
        "states": STATES,
        "group_kinds": GROUP_KIND_CHOICES,
        "resolutions": RESOLUTIONS,
        "active_statuses": list(RemediationJob.ACTIVE),
        "state_counts": state_counts,
        "total_open": sum(n for _, n in state_counts),
        "resolution_counts": [(resolution, closed_counts.get(resolution, 0)) for resolution in RESOLUTIONS],
        "query": urlencode(query),
        "query_with_sort": urlencode({**query, "sort": sort}),
        "clusters": visible_clusters(scope, clusters_list()).values_list("name", flat=True),
        "can_approve": may_approve(request.user),
        # The rows whose action links are shown: those the person's scope lets them act on.
        "actable": actable_finding_ids(scope, (f.id for f in page.object_list)),
    }, 200 if valid else 400


def _filter_values(form: FindingFilterForm) -> dict[str, str]:
    return {key: form.data.get(key, "") for key in ("cluster", "topic", "group", "state", "group_type", "resolution",
                                                    "since", "until")}


def _triage_context(request: HttpRequest) -> tuple[dict, int]:
    """The triage's context and status: open findings by cluster, group and
    topic, with the page's filters (cluster, part of a topic or group name,
    state, group type)."""
    form = FindingFilterForm(request.GET, history=False, sorts=TRIAGE_SORTS)
    valid = form.is_valid()
    filters = form.selector_filters() if valid else {}
    scope = scope_of(request.user)
    sort = form.cleaned_data.get("sort", "") if valid else ""
    outline = findings_triage_outline(**filters, scope=scope, by_expiry=sort == "expires") if valid else ()
    # A page of groups (in the triage's order, clusters keeping their totals): rendering
    # a thousand group cards took most of a second.
    page = Paginator(range(sum(len(cluster.groups) for cluster in outline)), TRIAGE_GROUPS_PER_PAGE).get_page(
        request.GET.get("page"))
    shown = findings_triage_groups(triage_slice(outline, start=page.start_index() - 1, stop=page.end_index()),
                                   **filters, scope=scope) if outline else ()
    raw = _filter_values(form)
    filtered = {key: value for key, value in raw.items() if value}
    ordered = {**filtered, **({"sort": sort} if sort else {})}
    return {
        "view": "triage",
        "sort": sort,
        "triage_sorts": TRIAGE_SORTS.items(),
        "now": timezone.now(),
        "history": False,
        "form": form,
        "triage": shown,
        "page": page,
        "page_query": urlencode(ordered),
        "filters": raw,
        "filtered": bool(filtered),
        "hidden_total": findings_list(scope=scope).count() if filtered and not outline else 0,
        "states": STATES,
        "group_kinds": GROUP_KIND_CHOICES,
        "query": urlencode(filtered),
        "clusters": visible_clusters(scope, clusters_list()).values_list("name", flat=True),
        "can_approve": may_approve(request.user),
        "actable": actable_finding_ids(scope, (f.id for c in shown for g in c.groups for t in g.topics
                                               for f in t.findings)),
    }, 200 if valid else 400


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Open work triaged by cluster, group and topic; ``view=partitions``
    is the same open work one row per partition, and ``view=history``
    lists every finding, closed ones with their way out."""
    if request.GET.get("view") in ("partitions", "history"):
        context, status = _findings_context(request)
        return render(request, "groups/findings.html", context, status=status)
    context, status = _triage_context(request)
    return render(request, "groups/triage.html", context, status=status)


@login_required
@require_GET
def findings_table(request: HttpRequest) -> HttpResponse:
    """The per-partition table and counts alone, for the page's live refresh."""
    context, status = _findings_context(request)
    return render(request, "groups/_findings_table.html", context, status=status)


@login_required
@require_GET
def findings_triage_fragment(request: HttpRequest) -> HttpResponse:
    """The triage alone, for the home page's live refresh."""
    context, status = _triage_context(request)
    return render(request, "groups/_triage.html", context, status=status)


def _records_shown(read: list[dict]) -> list[dict]:
    """The worker's records for the page: timestamps as datetimes, and for
    each the offsets between it and the one before that are not shown
    (``skipped``: the middle of the range, or what compaction removed)."""
    shown, previous = [], None
    for record in read:
        at = record["timestamp"]
        skipped = (previous + 1, record["offset"]) if previous is not None and record["offset"] > previous + 1 else None
        shown.append({**record, "timestamp": datetime.fromisoformat(at) if at else None, "skipped": skipped})
        previous = record["offset"]
    return shown


@login_required
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def finding_records(request: HttpRequest, finding_id: int) -> HttpResponse:
    """The record viewer (approvers only): GET shows what would be read; POST
    reads the first and last records of the missed range through a worker
    and shows them, once: the answer is sent with no-store and kept nowhere.
    A POST's role is checked by the service that reads (once a request)."""
    if request.method != "POST" and not may_approve(request.user):
        raise PermissionDenied("reading records needs the approver role")
    finding = _readable_finding(request, finding_id)
    if scope_of(request.user).may_act_on_finding(finding) is None:
        raise PermissionDenied("reading records needs an approver role whose scope covers this finding")
    context = {"finding": finding, "where": record_viewer.finding_records_range(finding=finding), "count": 5,
               "max_count": MAX_RECORDS_PER_END, "records": None, "errors": []}
    status = 200
    if request.method == "POST":
        context["count"] = request.POST.get("count", "")
        try:
            _, read = record_viewer.finding_records_read(user=request.user, finding_id=finding.id, count=context["count"])
            context["records"] = _records_shown(read)
        except ValidationError as error:
            context["errors"], status = error.messages, 400
        except record_viewer.RecordsUnreadable as error:
            context["errors"], status = [str(error)], 502
        except QueueUnavailable as error:
            context["errors"], status = [str(error)], 503
        except TaskTimedOut as error:
            context["errors"], status = [str(error)], 504
    return render(request, "groups/records.html", context, status=status)


def _readable_finding(request: HttpRequest, finding_id: int) -> Finding:
    """The finding, if the person's scope lets them read it; else a 404 (not a
    403: a finding outside one's scope is not shown to exist)."""
    try:
        finding = finding_get(finding_id=finding_id)
    except Finding.DoesNotExist:
        raise Http404(f"no finding {finding_id}") from None
    if scope_of(request.user).may_read_finding(finding) is None:
        raise Http404(f"no finding {finding_id}")
    return finding


def _finding_context(request: HttpRequest, finding_id: int) -> dict:
    finding = _readable_finding(request, finding_id)
    jobs = list(finding_jobs_list(finding=finding))
    active = next((job for job in jobs if job.status in RemediationJob.ACTIVE), None)
    repair = finding_repair_options(finding=finding, active_job=active.id if active else None)
    return {
        "finding": finding, "jobs": jobs, "active_job": active,
        "members": finding_group_members(finding=finding),
        "expansions": expansions_adding_partition(user=request.user, topic_id=finding.topic_id,
                                                  partition=finding.partition),
        "audit": finding_audit_events_list(finding=finding, job_ids=[job.id for job in jobs]),
        "recommendation": repair["recommendation"], "options": repair["options"],
        "bracket_seconds": (finding.pickup_before - finding.pickup_after).total_seconds()
        if finding.pickup_before and finding.pickup_after else None,
        "definite_end": finding.first_log_start + finding.missed_definite,
        "if_latest_end": finding.first_log_start + (finding.missed_definite_if_latest or 0),
        "possible_end": finding.first_log_start + finding.missed_definite + finding.missed_possible,
        "records": finding_record_counts(finding=finding),
        "urgency": finding_urgency_shown(finding=finding, missed_start=missed_range_of(finding).start,
                                         now=timezone.now()),
        "can_approve": may_approve(request.user)
        and scope_of(request.user).may_act_on_finding(finding) is not None,
    }


@login_required
@require_GET
def finding_detail(request: HttpRequest, finding_id: int) -> HttpResponse:
    """One finding: the evidence in words and numbers, the group's members,
    what each repair would do, and its audit trail. Reads stored state only;
    refreshes itself while a job works on the finding."""
    return render(request, "groups/finding.html", _finding_context(request, finding_id))


@login_required
@require_GET
def finding_live(request: HttpRequest, finding_id: int) -> HttpResponse:
    """The finding page without its frame, for its live refresh."""
    return render(request, "groups/_finding.html", _finding_context(request, finding_id))


@login_required
@require_GET
def freshness(request: HttpRequest) -> HttpResponse:
    """The header's freshness line and banner alone, for their live refresh."""
    return render(request, "_freshness.html")
