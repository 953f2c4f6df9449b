"""The expansion endpoints (issue 33): the plan of adding partitions to a
topic (``dry_run`` true), the request for it (``dry_run`` false: an expansion
job waiting for a second approver), its approval or refusal, and the job."""

from django.http import HttpRequest
from ninja import Router, Status

from groups.api.schemas import (
    Error,
    ExpansionApproveIn,
    ExpansionIn,
    ExpansionJobOut,
    ExpansionPlanOut,
    ExpansionRefuseIn,
    PathId,
)
from groups.selectors.expansion import expansion_jobs_visible
from groups.services.expansion import job as jobs, plan as plans

router = Router()
ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 503: Error}


@router.post("expansions", response={200: ExpansionPlanOut, 201: ExpansionJobOut, **ERRORS},
             operation_id="expansion_plan",
             summary="dry_run true: the plan of raising a topic's partition count, per group that reads it: its "
             "policy and where it comes from, what the expansion does to it (covered, protected before, repaired "
             "after, at risk) and why, the offsets it is expected to miss (an estimate), the broker's verdict "
             "(CreatePartitions with validate_only) and the plan's fingerprint; needs the viewer role. dry_run "
             "false with that fingerprint (and per group repaired after, optionally, its sink and max_records): "
             "the expansion job, stored waiting for a second approver (201); needs the approver role; a plan that "
             "changed since is a 409, a refused count a 400, and nothing is stored. Session requests need a CSRF "
             "token.")
def plan(request: HttpRequest, payload: ExpansionIn):
    if payload.dry_run is False:
        repairs = None if payload.repairs is None else {
            group: {key: value for key, value in choice.dict().items() if value is not None}
            for group, choice in payload.repairs.items()}
        job = jobs.expansion_request(user=request.user, cluster=payload.cluster, topic=payload.topic,
                                               partitions=payload.partitions, fingerprint=payload.fingerprint,
                                               repairs=repairs)
        return Status(201, expansion_jobs_visible(user=request.user).get(id=job.id))
    planned = plans.expansion_plan(user=request.user, cluster=payload.cluster, topic=payload.topic,
                                        partitions=payload.partitions, dry_run=payload.dry_run)
    return plans.expansion_plan_as_dict(planned)


def _job(request: HttpRequest, job_id: int):
    job = expansion_jobs_visible(user=request.user).filter(id=job_id).first()
    if job is None:
        raise jobs.ExpansionJobNotFound(f"no expansion {job_id}")
    return job


@router.get("expansions/{job_id}", response={200: ExpansionJobOut, 401: Error, 403: Error, 404: Error},
            operation_id="expansion_job", summary="One expansion job: its plan, state, steps and verdict per group.")
def job(request: HttpRequest, job_id: PathId):
    return _job(request, job_id)


@router.post("expansions/{job_id}/approve", response={200: ExpansionJobOut, **ERRORS},
             operation_id="expansion_approve",
             summary="Approve a planned expansion (the approver role; under FOUR_EYES not its requester): the "
             "plan is made again and must be the one requested (409 otherwise, nothing approved); then the job "
             "runs.")
def approve(request: HttpRequest, job_id: PathId, payload: ExpansionApproveIn):
    jobs.expansion_approve(user=request.user, job_id=job_id, fingerprint=payload.fingerprint)
    return _job(request, job_id)


@router.post("expansions/{job_id}/refuse", response={200: ExpansionJobOut, **ERRORS},
             operation_id="expansion_refuse", summary="Refuse a planned expansion, with a reason; nothing changes.")
def refuse(request: HttpRequest, job_id: PathId, payload: ExpansionRefuseIn):
    jobs.expansion_refuse(user=request.user, job_id=job_id, reason=payload.reason)
    return _job(request, job_id)



