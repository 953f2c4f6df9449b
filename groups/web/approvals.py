"""The approve flows: a remediation's preview and approval (one finding or
several of one group), a finding's dismissal, and the same for a selection
across groups (bulk approve, bulk dismiss). Each POST creates what the
preview on screen showed, or nothing.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from groups.selectors.access import scope_of, visible_findings
from groups.selectors.lists import (
    findings_selected,
)
from groups.services import bulk, previews, remediation
from groups.services.access import approval_refusal, approver_require
from groups.services.dispatch import QueueUnavailable
from groups.models import RemediationJob
from groups.selectors.finding import findings_with_rows


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


def _render_approve(request: HttpRequest, *, kind: str, ids, params, preview, errors=(), status=200) -> HttpResponse:
    return render(request, f"groups/approve_{kind}.html", {
        "ids_csv": ",".join(map(str, ids)), "params": params, "preview": preview, "kind": kind,
        # What this preview shows (the plan and each finding's accounting too), sent back on approval.
        "previewed": previews.preview_fingerprint(kind=kind, preview=preview) if preview else "",
        "errors": list(errors), "handlers": settings.BACKFILL_HANDLERS,
        "can_approve": not approval_refusal(request.user, what="remediations",
                                            findings=preview["findings"] if preview else ()),
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

    Who may approve is the service's check (a 403), once.
    """
    if "preview" in request.POST:
        shown = [(name, value) for name in ("ids", *FORM_FIELDS[kind]) for value in request.POST.getlist(name)]
        return redirect(f"{reverse(f'preview_{kind}')}?{urlencode(shown)}")
    try:
        ids, params, preview = _preview(request, kind=kind, source=request.POST)
        job = remediation.job_request_previewed(user=request.user, kind=kind, preview=preview,
                                                previewed=request.POST.get("previewed", ""))
    except remediation.ChangedSincePreview as changed:
        return _render_approve(request, kind=kind, ids=ids, params=params, preview=preview,
                               errors=[str(changed)], status=409)
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
    finding = get_object_or_404(visible_findings(scope_of(request.user), findings_with_rows()), id=finding_id)
    return render(request, "groups/dismiss.html", {"finding": finding})


@login_required
@require_POST
def dismiss(request: HttpRequest, finding_id: int) -> HttpResponse:
    finding = get_object_or_404(visible_findings(scope_of(request.user), findings_with_rows()), id=finding_id)
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
    (``bulk.findings_dismiss``): bad input is shown on the form and
    dismisses nothing; otherwise the list says what was dismissed and what
    was refused, and why."""
    try:
        ids = _selected_ids(request)
        result = bulk.findings_dismiss(user=request.user, finding_ids=ids,
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
    approver_require(request.user)
    kind = request.GET.get("kind", "") if request.GET.get("kind") in previews.BULK_PARAMS else "reset"
    try:
        kind = _bulk_kind(request.GET)
        ids = _selected_ids(request)
        if not ids:
            raise ValidationError("Select one or more findings first.")
        ids = bulk.bulk_ids(ids, verb="approve")
    except ValidationError as error:
        return _render_approve_many(request, kind=kind, ids=_whole_numbers(request.GET.getlist("ids")),
                                    errors=error.messages, status=400)
    return _render_approve_many(request, kind=kind, ids=ids)


@login_required
@require_POST
def approve_many(request: HttpRequest) -> HttpResponse:
    """Approve the previewed jobs (``bulk.findings_approve``), one per
    finding, each only if its plan is still the one the preview showed (the
    form's fingerprints). Bad input is shown on the form and creates nothing;
    otherwise the list says which jobs were created and what was refused, and why."""
    kind = request.POST.get("kind", "") if request.POST.get("kind") in previews.BULK_PARAMS else "reset"
    try:
        kind = _bulk_kind(request.POST)
        ids = _selected_ids(request)
        previewed = {i: request.POST.get(f"previewed-{i}", "") for i in ids}
        result = bulk.findings_approve(user=request.user, finding_ids=ids, kind=kind, previewed=previewed)
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
