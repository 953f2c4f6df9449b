"""The endpoints for automation: approve or dismiss a finding. They validate
(groups.api.schemas), then call one service, which checks the approver role."""


from django.http import HttpRequest

from ninja import Router, Status

from groups.api.schemas import (
    ApprovedManyOut, ApproveIn, ApproveManyIn, DismissedManyOut, DismissedOut, DismissIn, DismissManyIn, DuplicateError, Error, JobOut, PathId,
)
from groups.services import bulk, remediation
from groups.selectors.jobs import job_get

router = Router()
_ERRORS = {400: Error, 401: Error, 403: Error, 404: Error}


@router.post("findings/{id}/approve", response={201: JobOut, **_ERRORS, 409: DuplicateError, 503: Error},
             operation_id="finding_approve",
             summary="Request (and, without four-eyes, approve) a reset or a backfill; needs the approver role. "
             "Session requests need a CSRF token; token requests do not.")
def approve(request: HttpRequest, id: PathId, payload: ApproveIn):
    params = payload.model_dump(include={"target", "value", "sink", "replay_topic", "handler", "until"}, exclude_unset=True)
    job = remediation.job_request(user=request.user, finding_ids=[id, *payload.also], kind=payload.kind,
                                  params=params)
    return Status(201, job_get(job_id=job.id))


@router.post("findings/{id}/dismiss", response={200: DismissedOut, **_ERRORS, 409: Error},
             operation_id="finding_dismiss",
             summary="Close a finding with a required reason; needs the approver role. 409 when it is closed "
             "already or a job is active on it (cancel the job first).")
def dismiss(request: HttpRequest, id: PathId, payload: DismissIn):
    return remediation.finding_dismiss(user=request.user, finding_id=id, reason=payload.reason)


@router.post("findings/dismiss", response={200: DismissedManyOut, 400: Error, 401: Error, 403: Error},
             operation_id="findings_dismiss",
             summary="Dismiss findings of any groups with one required reason; needs the approver role. Each "
             "finding is dismissed and audited on its own; one that is unknown, closed already (a repeated "
             "request) or has an active job is refused with why, and the others are dismissed. Bad input (an "
             "id that is no id, no reason) is a 400 and dismisses nothing.")
def dismiss_many(request: HttpRequest, payload: DismissManyIn):
    return bulk.findings_dismiss(user=request.user, finding_ids=payload.ids, reason=payload.reason)


@router.post("findings/approve", response={200: ApprovedManyOut, 400: Error, 401: Error, 403: Error, 503: Error},
             operation_id="findings_approve",
             summary="Request (and, without four-eyes, approve) one job of one kind per finding, of any groups; "
             "needs the approver role. Each is planned and audited as its own approval would be; one that is "
             "unknown, closed, covered, under an active job (a repeated request) or that its plan refuses is "
             "refused with why, and the others get their job. Bad input is a 400 and creates nothing.")
def approve_many(request: HttpRequest, payload: ApproveManyIn):
    return bulk.findings_approve(user=request.user, finding_ids=payload.ids, kind=payload.kind)
