"""The JSON API for automation: approve or dismiss findings, list jobs.

Same services and permission checks as the pages. Authentication: a session
(CSRF enforced) or ``Authorization: Token <key>`` (see groups.services.tokens).
"""

from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from groups.services import remediation
from groups.services.dispatch import QueueUnavailable
from groups.api.read import BadParameter, _choice, _error, _iso, _paginated, api_view
from groups.models import Finding, RemediationJob


def job_json(job: RemediationJob) -> dict:
    return {
        "id": job.id, "kind": job.kind, "status": job.status, "cluster": job.cluster.name,
        "group": job.group.group_id, "findings": sorted(link.finding_id for link in job.job_findings.all()),
        "params": job.params, "plan": job.plan, "result": job.result,
        "progress_done": job.progress_done, "progress_total": job.progress_total,
        "status_reason": job.status_reason, "error": job.error,
        "requested_by": job.requested_by.username if job.requested_by else None,
        "approved_by": job.approved_by.username if job.approved_by else None,
        "retry_of": job.retry_of_id, "created_at": _iso(job.created_at), "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
    }


@api_view
def jobs(request: HttpRequest) -> JsonResponse:
    queryset = RemediationJob.objects.select_related("cluster", "group", "requested_by", "approved_by")
    queryset = queryset.prefetch_related("job_findings")
    status = _choice(request, "status", list(RemediationJob.Status.values))
    if status:
        queryset = queryset.filter(status=status)
    kind = _choice(request, "kind", list(RemediationJob.Kind.values))
    if kind:
        queryset = queryset.filter(kind=kind)
    return _paginated(request, queryset, job_json)


def _json_body(request: HttpRequest) -> dict:
    if not request.body:
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        raise BadParameter("body", "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadParameter("body", "the body must be a JSON object")
    return body


def write_view(view):
    """POST only, authenticated (session or token), JSON errors: 400 bad input,
    401 anonymous, 403 without the approver role, 404 unknown, 409 duplicate, 503 task queue away."""

    @never_cache
    @require_POST
    def wrapper(request: HttpRequest, **kwargs) -> JsonResponse:
        if not request.user.is_authenticated:
            return _error(401, "authentication required: log in or send Authorization: Token <key>")
        try:
            return view(request, **kwargs)
        except BadParameter as error:
            return _error(400, error.message, error.parameter)
        except Http404 as error:
            return _error(404, str(error))
        except PermissionDenied as error:
            return _error(403, str(error) or "permission denied")
        except remediation.DuplicateJob as duplicate:
            return JsonResponse({"error": str(duplicate), "job": duplicate.job.id}, status=409)
        except QueueUnavailable as error:
            return _error(503, str(error))
        except ValidationError as error:
            return _error(400, " ".join(error.messages))

    wrapper.__name__ = view.__name__
    return wrapper


def _require_finding(finding_id: int) -> None:
    if not Finding.objects.filter(id=finding_id).exists():
        raise Http404(f"no finding {finding_id}")


@write_view
def approve(request: HttpRequest, finding_id: int) -> JsonResponse:
    """Body: {"kind": "reset", "target": "earliest|offset|timestamp|shift", "value": N}
    or {"kind": "backfill", "sink": "parquet|kafka|handler", "replay_topic": T, "handler": H}
    (replay_topic: kafka sink, optional; handler: one of BACKFILL_HANDLERS); more findings of the same
    group may be listed in "also": [ids]."""
    body = _json_body(request)
    kind = body.get("kind")
    if kind not in RemediationJob.Kind.values:
        raise BadParameter("kind", "kind must be 'reset' or 'backfill'")
    also = body.get("also", [])
    if not isinstance(also, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in also):
        raise BadParameter("also", "also must be a list of finding ids")
    for key in ("target", "sink", "replay_topic", "handler"):
        if key in body and not isinstance(body[key], str):
            raise BadParameter(key, f"{key} must be text")
    value = body.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))):
        raise BadParameter("value", "value must be a whole number (or its text)")
    _require_finding(finding_id)
    params = {key: body[key] for key in ("target", "value", "sink", "replay_topic", "handler") if key in body}
    job = remediation.job_request(user=request.user, finding_ids=[finding_id, *also], kind=kind, params=params)
    return JsonResponse(job_json(RemediationJob.objects.get(id=job.id)), status=201)


@write_view
def dismiss(request: HttpRequest, finding_id: int) -> JsonResponse:
    body = _json_body(request)
    reason = body.get("reason", "")
    if not isinstance(reason, str):
        raise BadParameter("reason", "reason must be text")
    _require_finding(finding_id)
    finding = remediation.finding_dismiss(user=request.user, finding_id=finding_id, reason=reason)
    return JsonResponse({"id": finding.id, "closed_at": _iso(finding.closed_at), "closed_reason": finding.closed_reason})
