"""The operator's pages: new partitions (findings), the approve flows, and jobs.

Views are thin: they validate input, call one service or selector, and
redirect. They read stored state only; no page view calls Kafka. Every
state-changing view is POST-only; the services check permissions again.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from groups.selectors.access import actable_finding_ids, scope_of, visible_clusters, visible_findings, visible_jobs
from groups.selectors.finding import (
    finding_audit_events_list,
    finding_get,
    finding_group_members,
    finding_jobs_list,
)
from groups.selectors.lists import (
    findings_count_by_state_and_resolution,
    findings_list,
    findings_selected,
    findings_triage,
)
from groups.domain.triage import triage_slice
from groups.web.forms import FindingFilterForm
from groups.web.job_result import job_result_view
from groups.services import previews, remediation
from groups.services.previews import finding_repair_options
from groups.domain.records import MAX_RECORDS_PER_END
from groups.services import records
from groups.services.dispatch import QueueUnavailable, TaskTimedOut
from groups.models import Cluster, Finding, JobFinding, RemediationJob

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
STATES = [choice for choice, _ in Finding.State.choices]
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
    form = FindingFilterForm(request.GET, history=history)
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
    links = JobFinding.objects.select_related("job").order_by("-job__created_at", "-job_id")
    findings = findings.prefetch_related(Prefetch("job_findings", queryset=links, to_attr="job_links"))
    page = Paginator(findings, PAGE_SIZE).get_page(request.GET.get("page"))
    for finding in page.object_list:
        finding.shown_job = _shown_job(finding)
    scope = scope_of(request.user)
    counts = findings_count_by_state_and_resolution(
        findings_list(**{**filters, "state": None, "include_closed": True, "resolution": None}, scope=scope)
    )
    raw = _filter_values(form)
    filtered = {key: value for key, value in raw.items() if value}
    query = {"view": "history" if history else "partitions", **filtered}
    state_counts = [(state, counts.get((state, "open"), 0)) for state in STATES]
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
        "resolutions": RESOLUTIONS,
        "active_statuses": list(RemediationJob.ACTIVE),
        "state_counts": state_counts,
        "total_open": sum(n for _, n in state_counts),
        "resolution_counts": [(resolution, sum(n for (_, r), n in counts.items() if r == resolution))
                              for resolution in RESOLUTIONS],
        "query": urlencode(query),
        "query_with_sort": urlencode({**query, "sort": sort}),
        "clusters": visible_clusters(scope, Cluster.objects.all()).values_list("name", flat=True),
        "can_approve": request.user.has_perm(remediation.APPROVE_PERMISSION),
        # The rows whose action links are shown: those the person's scope lets them act on.
        "actable": actable_finding_ids(scope, (f.id for f in page.object_list)),
    }, 200 if valid else 400


def _filter_values(form: FindingFilterForm) -> dict[str, str]:
    return {key: form.data.get(key, "") for key in ("cluster", "topic", "group", "state", "resolution", "since",
                                                    "until")}


def _triage_context(request: HttpRequest) -> tuple[dict, int]:
    """The triage's context and status: open findings by cluster, group and
    topic, with the page's filters (cluster, part of a topic or group name, state)."""
    form = FindingFilterForm(request.GET, history=False)
    valid = form.is_valid()
    filters = form.selector_filters() if valid else {}
    scope = scope_of(request.user)
    clusters = findings_triage(**filters, scope=scope) if valid else ()
    # A page of groups (in the triage's order, clusters keeping their totals): rendering
    # a thousand group cards took most of a second.
    page = Paginator(range(sum(len(cluster.groups) for cluster in clusters)), TRIAGE_GROUPS_PER_PAGE).get_page(
        request.GET.get("page"))
    shown = triage_slice(clusters, start=page.start_index() - 1, stop=page.end_index()) if clusters else ()
    raw = _filter_values(form)
    filtered = {key: value for key, value in raw.items() if value}
    return {
        "view": "triage",
        "history": False,
        "form": form,
        "triage": shown,
        "page": page,
        "page_query": urlencode(filtered),
        "filters": raw,
        "filtered": bool(filtered),
        "hidden_total": findings_list(scope=scope).count() if filtered and not clusters else 0,
        "states": STATES,
        "query": urlencode(filtered),
        "clusters": visible_clusters(scope, Cluster.objects.all()).values_list("name", flat=True),
        "can_approve": request.user.has_perm(remediation.APPROVE_PERMISSION),
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
    and shows them, once: the answer is sent with no-store and kept nowhere."""
    if not request.user.has_perm(remediation.APPROVE_PERMISSION):
        raise PermissionDenied("reading records needs the approver role")
    finding = _readable_finding(request, finding_id)
    if scope_of(request.user).may_act_on_finding(finding) is None:
        raise PermissionDenied("reading records needs an approver role whose scope covers this finding")
    context = {"finding": finding, "where": records.finding_records_range(finding=finding), "count": 5,
               "max_count": MAX_RECORDS_PER_END, "records": None, "errors": []}
    status = 200
    if request.method == "POST":
        context["count"] = request.POST.get("count", "")
        try:
            _, read = records.finding_records_read(user=request.user, finding_id=finding.id, count=context["count"])
            context["records"] = _records_shown(read)
        except ValidationError as error:
            context["errors"], status = error.messages, 400
        except records.RecordsUnreadable as error:
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
        "audit": finding_audit_events_list(finding=finding, job_ids=[job.id for job in jobs]),
        "recommendation": repair["recommendation"], "options": repair["options"],
        "bracket_seconds": (finding.pickup_before - finding.pickup_after).total_seconds()
        if finding.pickup_before and finding.pickup_after else None,
        "definite_end": finding.first_log_start + finding.missed_definite,
        "possible_end": finding.first_log_start + finding.missed_definite + finding.missed_possible,
        "can_approve": request.user.has_perm(remediation.APPROVE_PERMISSION)
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


def _selected_ids(request: HttpRequest) -> list[int]:
    raw = request.POST.getlist("ids") if request.method == "POST" else request.GET.getlist("ids")
    ids = []
    for item in raw:
        for part in str(item).split(","):
            if part.strip():
                try:
                    ids.append(int(part))
                except ValueError:
                    raise ValidationError(f"not a finding id: {part!r}") from None
    return ids


def _preview(request: HttpRequest, *, kind: str, source) -> tuple[list[int], dict, dict]:
    """The form's values and the service's preview of them; raises ValidationError for bad input."""
    ids = _selected_ids(request)
    if kind == RemediationJob.Kind.RESET:
        params = {"target": source.get("target", "earliest"), "value": source.get("value") or None}
    else:
        params = {"sink": source.get("sink", ""), "replay_topic": source.get("replay_topic", ""),
                  "handler": source.get("handler", ""), "until": source.get("until", "") or "bound"}
    preview = previews.job_preview(finding_ids=ids, kind=kind, params=params)
    scope = scope_of(request.user)
    if any(scope.may_read_finding(finding) is None for finding in preview["findings"]):
        raise Http404("no such finding")  # outside the person's scope: not shown to exist
    if kind == RemediationJob.Kind.BACKFILL:
        params["sink"] = preview["sink"]  # the group's default sink when none was chosen
    return ids, params, preview


# The inputs of each approve form besides the findings' ids.
FORM_FIELDS = {RemediationJob.Kind.RESET: ("target", "value"),
               RemediationJob.Kind.BACKFILL: ("sink", "replay_topic", "handler", "until")}
CHANGED_SINCE_PREVIEW = "The values changed since the preview; check the plan below and approve again."


def _previewed(*, kind: str, preview: dict) -> str:
    """The fingerprint of what a preview shows: the kind, the findings and the
    job's parameters as the service normalised them (what the job would
    store). The approve form sends it back; an approval whose own values
    fingerprint differently creates nothing. A plain hash, not a secret: it
    catches a form changed after its preview, not a forger (an approver may
    approve anything anyway)."""
    shown = {"kind": kind, "findings": sorted(f.id for f in preview["findings"]), "params": preview["params"]}
    return hashlib.sha256(json.dumps(shown, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _render_approve(request: HttpRequest, *, kind: str, ids, params, preview, errors=(), status=200) -> HttpResponse:
    return render(request, f"groups/approve_{kind}.html", {
        "ids_csv": ",".join(map(str, ids)), "params": params, "preview": preview, "kind": kind,
        "previewed": _previewed(kind=kind, preview=preview) if preview else "",
        "errors": list(errors), "handlers": settings.BACKFILL_HANDLERS,
        "can_approve": request.user.has_perm(remediation.APPROVE_PERMISSION) and not (preview and any(
            scope_of(request.user).may_act_on_finding(finding) is None for finding in preview["findings"])),
    }, status=status)


def _preview_page(request: HttpRequest, *, kind: str) -> HttpResponse:
    """The preview of a remediation, before anyone approves it (GET, changes nothing)."""
    try:
        ids, params, preview = _preview(request, kind=kind, source=request.GET)
    except ValidationError as error:
        return _render_approve(request, kind=kind, ids=request.GET.getlist("ids"), params=request.GET.dict(),
                               preview=None, errors=error.messages, status=400)
    except remediation.Conflict as error:
        return _render_approve(request, kind=kind, ids=request.GET.getlist("ids"), params=request.GET.dict(),
                               preview=None, errors=[str(error)], status=409)
    return _render_approve(request, kind=kind, ids=ids, params=params, preview=preview)


def _approve(request: HttpRequest, *, kind: str) -> HttpResponse:
    """POST from the approve form, whose inputs are the ones on screen.

    1. Its Preview button (also what Enter submits): go to the preview of the
       values received; nothing is created.
    2. Plan from the values received; bad input or a closed finding is shown
       on the form, and nothing is created.
    3. Values whose fingerprint is not the one the last preview rendered
       (changed on screen since, or no fingerprint): show the preview of the
       values received, with a message, as a 409; nothing is created.
    4. Otherwise create one job from that preview (planned once), then show it.
    """
    if not request.user.has_perm(remediation.APPROVE_PERMISSION):
        raise PermissionDenied("approving remediations needs the approver role")
    if "preview" in request.POST:
        shown = [(name, value) for name in ("ids", *FORM_FIELDS[kind]) for value in request.POST.getlist(name)]
        return redirect(f"{reverse(f'preview_{kind}')}?{urlencode(shown)}")
    try:
        ids, params, preview = _preview(request, kind=kind, source=request.POST)
        if request.POST.get("previewed") != _previewed(kind=kind, preview=preview):
            return _render_approve(request, kind=kind, ids=ids, params=params, preview=preview,
                                   errors=[CHANGED_SINCE_PREVIEW], status=409)
        job = remediation.job_request_previewed(user=request.user, kind=kind, preview=preview)
    except remediation.DuplicateJob as duplicate:
        messages.warning(request, str(duplicate))
        return redirect("job_detail", job_id=duplicate.job.id)
    except remediation.Conflict as error:
        # Another action on these findings came first (a dismissal): nothing is created.
        return _render_approve(request, kind=kind, ids=request.POST.getlist("ids"), params=request.POST.dict(),
                               preview=None, errors=[str(error)], status=409)
    except ValidationError as error:
        # Bad input is shown on the same form; nothing is created.
        return _render_approve(request, kind=kind, ids=request.POST.getlist("ids"), params=request.POST.dict(),
                               preview=None, errors=error.messages, status=400)
    except QueueUnavailable as error:
        return _render_approve(request, kind=kind, ids=request.POST.getlist("ids"), params=request.POST.dict(),
                               preview=None, errors=[str(error)], status=503)
    verb = "requested (needs a second approver)" if job.status == RemediationJob.Status.REQUESTED else "approved"
    messages.success(request, f"{kind} job {job.id} {verb}")
    return redirect("job_detail", job_id=job.id)


@login_required
@require_GET
def preview_reset(request: HttpRequest) -> HttpResponse:
    return _preview_page(request, kind=RemediationJob.Kind.RESET)


@login_required
@require_GET
def preview_backfill(request: HttpRequest) -> HttpResponse:
    return _preview_page(request, kind=RemediationJob.Kind.BACKFILL)


@login_required
@require_POST
def approve_reset(request: HttpRequest) -> HttpResponse:
    return _approve(request, kind=RemediationJob.Kind.RESET)


@login_required
@require_POST
def approve_backfill(request: HttpRequest) -> HttpResponse:
    return _approve(request, kind=RemediationJob.Kind.BACKFILL)


@login_required
@require_GET
def dismiss_form(request: HttpRequest, finding_id: int) -> HttpResponse:
    finding = get_object_or_404(visible_findings(scope_of(request.user), Finding.objects.select_related(
        "group", "topic", "cluster")), id=finding_id)
    return render(request, "groups/dismiss.html", {"finding": finding})


@login_required
@require_POST
def dismiss(request: HttpRequest, finding_id: int) -> HttpResponse:
    if not request.user.has_perm(remediation.APPROVE_PERMISSION):
        raise PermissionDenied("dismissing findings needs the approver role")
    finding = get_object_or_404(visible_findings(scope_of(request.user), Finding.objects.select_related(
        "group", "topic", "cluster")), id=finding_id)
    try:
        remediation.finding_dismiss(user=request.user, finding_id=finding.id, reason=request.POST.get("reason", ""))
    except ValidationError as error:
        return render(request, "groups/dismiss.html", {"finding": finding, "errors": error.messages}, status=400)
    except remediation.Conflict as error:
        return render(request, "groups/dismiss.html", {"finding": finding, "errors": [str(error)]}, status=409)
    messages.success(request, "finding dismissed")
    return redirect("home")


def _render_dismiss_many(request: HttpRequest, *, ids: list[int], errors=(), status: int = 200) -> HttpResponse:
    findings = list(visible_findings(scope_of(request.user), findings_selected(finding_ids=ids)))
    found = {finding.id for finding in findings}
    return render(request, "groups/dismiss_many.html", {
        "findings": findings, "unknown": [i for i in ids if i not in found], "errors": list(errors),
        "reason": request.POST.get("reason", ""),
    }, status=status)


def _whole_numbers(raw: list[str]) -> list[int]:
    """The ids of a selection that are ids, to show again beside a form error."""
    return [int(part) for item in raw for part in item.split(",") if part.strip().isascii()
            and part.strip().isdigit() and 0 < int(part) < 2**63]


@login_required
@require_GET
def dismiss_many_form(request: HttpRequest) -> HttpResponse:
    """The selection of the per-partition list (``ids``, of any groups),
    each with what stands in the way of dismissing it, and one reason for all."""
    try:
        ids = _selected_ids(request)
    except ValidationError as error:
        return _render_dismiss_many(request, ids=_whole_numbers(request.GET.getlist("ids")), errors=error.messages,
                                    status=400)
    if not ids:
        return _render_dismiss_many(request, ids=[], errors=["Select one or more findings first."], status=400)
    return _render_dismiss_many(request, ids=ids)


@login_required
@require_POST
def dismiss_many(request: HttpRequest) -> HttpResponse:
    """Dismiss the selection with one reason, each finding on its own
    (``remediation.findings_dismiss``): bad input is shown on the form and
    dismisses nothing; otherwise the list says what was dismissed and what
    was refused, and why."""
    if not request.user.has_perm(remediation.APPROVE_PERMISSION):
        raise PermissionDenied("dismissing findings needs the approver role")
    try:
        ids = _selected_ids(request)
        result = remediation.findings_dismiss(user=request.user, finding_ids=ids,
                                              reason=request.POST.get("reason", ""))
    except ValidationError as error:
        return _render_dismiss_many(request, ids=_whole_numbers(request.POST.getlist("ids")),
                                    errors=error.messages, status=400)
    asked = len(result.dismissed) + len(result.refused)
    if result.dismissed:
        messages.success(request, f"Dismissed {len(result.dismissed)} of {asked} findings: "
                                  f"{', '.join(map(str, result.dismissed))}.")
    else:
        messages.warning(request, f"Dismissed none of the {asked} findings.")
    for finding_id, why in result.refused:
        messages.warning(request, f"Not dismissed: finding {finding_id}: {why}")
    return redirect(f"{reverse('home')}?view=partitions")


def _render_approve_many(request: HttpRequest, *, kind: str, ids: list[int], errors=(),
                         status: int = 200) -> HttpResponse:
    """The bulk approval's preview: each finding's own plan (or why it is
    refused), and a form carrying each plan's fingerprint."""
    plans = previews.findings_bulk_preview(finding_ids=ids, kind=kind, user=request.user) if ids and not errors else ()
    accepted = [plan for plan in plans if not plan.refused]
    return render(request, "groups/approve_many.html", {
        "kind": kind, "other_kind": "backfill" if kind == "reset" else "reset", "plans": plans,
        "accepted": accepted, "ids_csv": ",".join(map(str, ids)), "errors": list(errors),
        "total_definite": sum(plan.finding.missed_definite for plan in accepted),
        "total_possible": sum(plan.finding.missed_possible for plan in accepted),
        "four_eyes": settings.FOUR_EYES,
    }, status=status)


def _bulk_kind(source) -> str:
    kind = source.get("kind", "")
    if kind not in previews.BULK_PARAMS:
        raise ValidationError(f"choose reset or backfill, not {kind[:40]!r}")
    return kind


@login_required
@require_GET
def approve_many_form(request: HttpRequest) -> HttpResponse:
    """The preview of approving one job of a kind per selected finding (of
    any groups): what each would plan, exactly as its own approve page would,
    and what is refused and why. Approvers only; changes nothing."""
    if not request.user.has_perm(remediation.APPROVE_PERMISSION):
        raise PermissionDenied("approving remediations needs the approver role")
    kind = request.GET.get("kind", "") if request.GET.get("kind") in previews.BULK_PARAMS else "reset"
    try:
        kind = _bulk_kind(request.GET)
        ids = _selected_ids(request)
        if not ids:
            raise ValidationError("Select one or more findings first.")
        ids = remediation.bulk_ids(ids, verb="approve")
    except ValidationError as error:
        return _render_approve_many(request, kind=kind, ids=_whole_numbers(request.GET.getlist("ids")),
                                    errors=error.messages, status=400)
    return _render_approve_many(request, kind=kind, ids=ids)


@login_required
@require_POST
def approve_many(request: HttpRequest) -> HttpResponse:
    """Approve the previewed jobs (``remediation.findings_approve``), one per
    finding, each only if its plan is still the one the preview showed (the
    form's fingerprints). Bad input is shown on the form and creates nothing;
    otherwise the list says which jobs were created and what was refused, and why."""
    if not request.user.has_perm(remediation.APPROVE_PERMISSION):
        raise PermissionDenied("approving remediations needs the approver role")
    kind = request.POST.get("kind", "") if request.POST.get("kind") in previews.BULK_PARAMS else "reset"
    try:
        kind = _bulk_kind(request.POST)
        ids = _selected_ids(request)
        previewed = {i: request.POST.get(f"previewed-{i}", "") for i in ids}
        result = remediation.findings_approve(user=request.user, finding_ids=ids, kind=kind, previewed=previewed)
    except ValidationError as error:
        return _render_approve_many(request, kind=kind, ids=_whole_numbers(request.POST.getlist("ids")),
                                    errors=error.messages, status=400)
    except QueueUnavailable as error:
        return _render_approve_many(request, kind=kind, ids=_whole_numbers(request.POST.getlist("ids")),
                                    errors=[str(error)], status=503)
    asked = len(result.jobs) + len(result.refused)
    if result.jobs:
        verb = "Requested (each needs a second approver)" if settings.FOUR_EYES else "Approved"
        messages.success(request, f"{verb} {len(result.jobs)} {kind} job{'s' if len(result.jobs) > 1 else ''} "
                                  f"for {len(result.jobs)} of {asked} findings: "
                                  + ", ".join(f"job {job.id} for finding {finding_id}"
                                              for finding_id, job in result.jobs) + ".")
    else:
        messages.warning(request, f"Approved nothing for the {asked} findings.")
    for finding_id, why in result.refused:
        messages.warning(request, f"Not approved: finding {finding_id}: {why}")
    return redirect(f"{reverse('home')}?view=partitions")


def _jobs_context(request: HttpRequest) -> dict:
    """The jobs list, filtered by status and kind, with what a filter hid."""
    status = request.GET.get("status", "")
    kind = request.GET.get("kind", "")
    queryset = (
        visible_jobs(scope_of(request.user), RemediationJob.objects.all())
        .select_related("cluster", "group", "requested_by", "approved_by")
        .annotate(finding_count=Count("job_findings"))
        .order_by("-created_at", "-id")
    )
    filters = {}
    if status in RemediationJob.Status.values:
        filters["status"] = status
    if kind in RemediationJob.Kind.values:
        filters["kind"] = kind
    page = Paginator(queryset.filter(**filters), PAGE_SIZE).get_page(request.GET.get("page"))
    query = urlencode(filters)
    return {
        "page": page, "statuses": RemediationJob.Status.values, "kinds": RemediationJob.Kind.values,
        "status": status, "kind": kind, "query": query, "filters": filters,
        # Only when the filter shows nothing: how many jobs it hid.
        "all_jobs": (visible_jobs(scope_of(request.user), RemediationJob.objects.all()).count()
                     if filters and not page.object_list else None),
        "live": any(job.status in RemediationJob.ACTIVE for job in page.object_list),
        "live_url": f"{reverse('jobs_live')}?{request.GET.urlencode()}",
    }


@login_required
@require_GET
def jobs(request: HttpRequest) -> HttpResponse:
    """Jobs, newest first; the table refreshes itself while a job on it is active."""
    return render(request, "groups/jobs.html", _jobs_context(request))


@login_required
@require_GET
def jobs_live(request: HttpRequest) -> HttpResponse:
    """The jobs table alone, for its live refresh."""
    return render(request, "groups/_jobs_table.html", _jobs_context(request))


def _job_context(request: HttpRequest, job_id: int) -> dict:
    job = get_object_or_404(
        visible_jobs(scope_of(request.user), RemediationJob.objects.all())
        .select_related("cluster", "group", "requested_by", "approved_by", "retry_of"),
        id=job_id,
    )
    findings = job.findings.select_related("topic", "generation", "cluster", "group").order_by("topic__name",
                                                                                              "partition")
    scope = scope_of(request.user)
    return {
        "job": job, "findings": findings, "result": job_result_view(job),
        "can_approve": request.user.has_perm(remediation.APPROVE_PERMISSION)
        and all(scope.may_act_on_finding(finding) is not None for finding in findings),
        "cancellable": job.status in RemediationJob.CANCELLABLE, "active": job.status in RemediationJob.ACTIVE,
    }


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """One job; the page refreshes itself while the job is active."""
    return render(request, "groups/job_detail.html", _job_context(request, job_id))


@login_required
@require_GET
def job_live(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page without its frame, for its live refresh."""
    return render(request, "groups/_job.html", _job_context(request, job_id))


@login_required
@require_GET
def freshness(request: HttpRequest) -> HttpResponse:
    """The header's freshness line and banner alone, for their live refresh."""
    return render(request, "_freshness.html")


def _job_action(request: HttpRequest, job_id: int, action, done: str) -> HttpResponse:
    try:
        job = action(user=request.user, job_id=job_id)
    except RemediationJob.DoesNotExist:
        return HttpResponse(status=404)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("job_detail", job_id=job_id)
    except QueueUnavailable as error:
        messages.error(request, str(error))
        return redirect("job_detail", job_id=job_id)
    except remediation.DuplicateJob as duplicate:
        messages.warning(request, str(duplicate))
        return redirect("job_detail", job_id=duplicate.job.id)
    except remediation.Conflict as error:
        messages.error(request, str(error))
        return redirect("job_detail", job_id=job_id)
    messages.success(request, f"job {job.id} {done}")
    return redirect("job_detail", job_id=job.id)


@login_required
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    seen = request.POST.get("status") or None

    def cancel(*, user, job_id: int) -> RemediationJob:
        return remediation.job_cancel(user=user, job_id=job_id, seen_status=seen)

    return _job_action(request, job_id, cancel, "cancelled")


@login_required
@require_POST
def job_retry(request: HttpRequest, job_id: int) -> HttpResponse:
    return _job_action(request, job_id, remediation.job_retry, "created as a retry")


@login_required
@require_POST
def job_approve(request: HttpRequest, job_id: int) -> HttpResponse:
    return _job_action(request, job_id, remediation.job_approve, "approved")

