"""The jobs pages: the list, one job (refreshing while it runs), and its
actions (cancel, retry, the second approval of four-eyes).
"""

from __future__ import annotations

import time
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from groups.selectors.expansion import expansions_queuing_backfill
from groups.domain.job_progress import stage_lines
from groups.selectors.access import may_approve, scope_of, visible_jobs
from groups.web.forms import JobFilterForm
from groups.web.job_result import job_result_view
from groups.services import remediation
from groups.services.dispatch import QueueUnavailable
from groups.models import RemediationJob
from groups.web.views import PAGE_SIZE
from groups.selectors.jobs import job_findings_list, jobs_all


def _jobs_context(request: HttpRequest) -> tuple[dict, int]:
    """The jobs list, filtered by status and kind, with what a filter hid, and
    its status: a status, kind or page the page does not offer is a 400 with
    the form's errors and no rows."""
    form = JobFilterForm(request.GET)
    valid = form.is_valid()
    queryset = (
        visible_jobs(scope_of(request.user), jobs_all())
        .select_related("cluster", "group", "requested_by", "approved_by")
        .annotate(finding_count=Count("job_findings"))
        .order_by("-created_at", "-id")
    )
    filters = form.selector_filters() if valid else {}
    page = Paginator(queryset.filter(**filters) if valid else queryset.none(), PAGE_SIZE).get_page(
        request.GET.get("page") if valid else 1)
    query = urlencode(filters)
    return {
        "form": form, "page": page, "statuses": RemediationJob.STATUSES, "kinds": RemediationJob.Kind.values,
        "status": request.GET.get("status", ""), "kind": request.GET.get("kind", ""), "query": query,
        "filters": filters,
        # Only when the filter shows nothing: how many jobs it hid.
        "all_jobs": (visible_jobs(scope_of(request.user), jobs_all()).count()
                     if filters and not page.object_list else None),
        "live": any(job.status in RemediationJob.ACTIVE for job in page.object_list),
        "live_url": f"{reverse('jobs_live')}?{request.GET.urlencode()}",
    }, 200 if valid else 400


@login_required
@require_GET
def jobs(request: HttpRequest) -> HttpResponse:
    """Jobs, newest first; the table refreshes itself while a job on it is active."""
    context, status = _jobs_context(request)
    return render(request, "groups/jobs.html", context, status=status)


@login_required
@require_GET
def jobs_live(request: HttpRequest) -> HttpResponse:
    """The jobs table alone, for its live refresh."""
    context, status = _jobs_context(request)
    return render(request, "groups/_jobs_table.html", context, status=status)


def _job_context(request: HttpRequest, job_id: int) -> dict:
    job = get_object_or_404(
        visible_jobs(scope_of(request.user), jobs_all())
        .select_related("cluster", "group", "requested_by", "approved_by", "retry_of"),
        id=job_id,
    )
    findings = job_findings_list(job=job)
    scope = scope_of(request.user)
    return {
        "job": job, "findings": findings, "result": job_result_view(job),
        "expansions": expansions_queuing_backfill(user=request.user, cluster_id=job.cluster_id,
                                                  group_id=job.group.group_id, job_id=job.id),
        "stages": stage_lines(job.progress_stages or [], now=time.time()),
        "can_approve": may_approve(request.user)
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
