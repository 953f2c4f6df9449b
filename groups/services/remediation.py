"""Writes for remediations: request, approve, cancel, retry, dismiss, and the
compare-and-set transitions that executors (offset reset, Spark backfill) use.
What a request plans is ``groups.services.previews``.

Views and the API call these; permissions are checked here too, so no path
can skip them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from groups.domain.group_kinds import group_kind
from groups.models import Finding, JobFinding, RemediationJob
from groups.services import dispatch
from groups.services.access import act_detail, approval_require, approver_require, scope_require_act
from groups.services.audit import audit_record
from groups.services.job_status import job_status_move
from groups.services.lifecycle import (
    Conflict,
    FindingNotFound,
    finding_active_job,
    finding_close,
    finding_require_open,
    findings_lock,
    findings_resolve_by_job,
    reason_require,
)
from groups.services.notifications import notifications_create
from groups.services.previews import job_preview, preview_fingerprint

log = logging.getLogger(__name__)
# Who asked for a job, in system jobs' params and audit rows.
SOURCE_DASHBOARD = "dashboard"
SOURCE_CLI = "cli"
SOURCE_AUTO_REPAIR = "auto-repair"
# What a dismissal's reason is called when it is refused.
DISMISSAL = "a dismissal"


class DuplicateJob(Conflict):
    """An active job of this kind already covers one of the findings."""

    def __init__(self, job: RemediationJob) -> None:
        super().__init__(f"{job.kind} job {job.id} is already {job.status} for these findings")
        self.job = job


def _named(findings: QuerySet[Finding]) -> list[Finding]:
    """The findings with what a scope is checked against (cluster, group, topic), in one query."""
    return list(findings.select_related("cluster", "group", "topic").order_by("id"))


def job_request(*, user, finding_ids: Iterable[int], kind: str, params: dict) -> RemediationJob:
    """A person's request for one job on the findings (API and retries):
    check the permission, plan from stored state with the group's defaults
    (``job_preview``), then ``job_request_previewed``."""
    approver_require(user)
    return _job_from_preview(user=user, kind=kind,
                             preview=job_preview(finding_ids=finding_ids, kind=kind, params=params))


class ChangedSincePreview(Conflict):
    """The approval sent the fingerprint of another preview than the one
    planned now: nothing was created; the fresh preview is to be shown."""


CHANGED_SINCE_PREVIEW = "The values changed since the preview; check the plan below and approve again."


def job_request_previewed(*, user, kind: str, preview: dict, previewed: str | None = None) -> RemediationJob:
    """A person's request for the job a preview (``job_preview``) shows, as
    the approve page has it already: the job stores the preview's params and
    plan, planned once. ``previewed``: the fingerprint of the preview the
    person saw (``previews.preview_fingerprint``); another one is
    ChangedSincePreview. Then ``job_create``."""
    approver_require(user)
    if previewed is not None and previewed != preview_fingerprint(kind=kind, preview=preview):
        raise ChangedSincePreview(CHANGED_SINCE_PREVIEW)
    return _job_from_preview(user=user, kind=kind, preview=preview)


def _job_from_preview(*, user, kind: str, preview: dict) -> RemediationJob:
    """The job of a preview, for a person already checked as an approver."""
    findings = preview["findings"]
    return job_create(cluster=findings[0].cluster, group=findings[0].group, kind=kind, params=preview["params"],
                      plan=preview["plan"], findings=findings, requested_by=user)


def job_create(
    *, cluster, group, kind: str, params: dict, plan: list[dict], findings: list[Finding], requested_by=None,
    source: str = SOURCE_DASHBOARD, enqueue: bool = True,
) -> RemediationJob:
    """The one place a job row is written, for every caller (pages, API, CLI,
    auto-repair). ``requested_by`` None means the system asked (``source``
    says who: "cli", "auto-repair"); the audit rows then name the source.

    1. Lock the findings' rows; one closed since it was read (dismissed,
       repaired, expired) is a Conflict, and nothing is written.
    2. Insert the job, ``approved`` at once, or ``requested`` when a person
       asked and FOUR_EYES is on (then another approver must approve it).
    3. Link the findings (active); an active job of this kind on one of them
       is a DuplicateJob (the partial unique constraint backs the check up).
    4. Audit, and enqueue an approved job after commit (unless ``enqueue`` is
       False: the command line runs its job itself). An approved job is not
       written at all while the task queue does not answer (QueueUnavailable).
    """
    four_eyes = settings.FOUR_EYES and requested_by is not None
    via = {} if requested_by is not None else {"via": source}
    if enqueue and not four_eyes:
        dispatch.queue_check()  # an approved job nobody can run is not written
    try:
        with transaction.atomic():
            ids = [f.id for f in findings]
            locked = findings_lock(Finding.objects.filter(id__in=ids))
            for finding in locked:
                finding_require_open(finding)
            acted = {} if requested_by is None else act_detail(
                requested_by, scope_require_act(requested_by, _named(Finding.objects.filter(id__in=ids))))
            existing = RemediationJob.objects.filter(
                job_findings__finding__in=findings, job_findings__active=True, kind=kind
            ).first()
            if existing is not None:
                raise DuplicateJob(existing)
            job = RemediationJob.objects.create(
                cluster=cluster, group=group, kind=kind,
                status=RemediationJob.Status.REQUESTED if four_eyes else RemediationJob.Status.APPROVED,
                params=params, plan=plan, requested_by=requested_by,
                approved_by=None if four_eyes else requested_by,
            )
            if not four_eyes:
                # Requested and approved in one act: one moment.
                job.approved_at = job.created_at
                job.save(update_fields=["approved_at"])
            JobFinding.objects.bulk_create(JobFinding(job=job, finding=f, kind=kind) for f in findings)
            audit_record(action="job.requested", actor=requested_by, cluster=cluster, object_type="job",
                         object_id=job.id, detail={"kind": kind, "group": group.group_id, "params": params, **via,
                                                   "findings": sorted(f.id for f in findings), **acted})
            if not four_eyes:
                audit_record(action="job.approved", actor=requested_by, cluster=cluster, object_type="job",
                             object_id=job.id, detail={"from": None, "to": "approved", **via, **acted})
                if enqueue:
                    _enqueue_on_commit(job.id)
    except IntegrityError:
        existing = (
            RemediationJob.objects.filter(job_findings__finding__in=findings, job_findings__active=True, kind=kind)
            .first()
        )
        if existing is None:
            raise
        raise DuplicateJob(existing) from None
    return job


def _enqueue_on_commit(job_id: int) -> None:
    dispatch.task_enqueue_on_commit(dispatch.RUN_REMEDIATION_JOB, job_id)


def job_transition(*, job_id: int, from_statuses: Iterable[str], to_status: str, actor=None, **fields) -> bool:
    """A remediation's status move (``job_status.job_status_move``): only from
    one of ``from_statuses``, False (nothing changed) when another request or
    worker moved it first. Its findings are locked first, as every lifecycle
    action does. Finishing frees the findings for a new job of the same kind;
    succeeding with a verified result closes them as repaired
    (``lifecycle.findings_resolve_by_job``). Succeeded and failed jobs notify
    the cluster's webhook."""

    def detail(job: RemediationJob) -> dict:
        said = {"to": to_status}
        if job.status_reason and "status_reason" in fields:
            said["reason"] = job.status_reason
        if job.error and "error" in fields:
            said["error"] = job.error
        return said

    def after(job: RemediationJob) -> None:
        if to_status in RemediationJob.FINISHED:
            JobFinding.objects.filter(job_id=job_id).update(active=False)
        repaired = []
        if to_status == RemediationJob.Status.SUCCEEDED:
            repaired = findings_resolve_by_job(job=job, now=job.updated_at)
        if to_status in (RemediationJob.Status.SUCCEEDED, RemediationJob.Status.FAILED):
            _notify_job_outcome(job, repaired=repaired)

    return job_status_move(model=RemediationJob, job_id=job_id, from_statuses=from_statuses, to_status=to_status,
                           actor=actor, detail=detail, after=after,
                           before=lambda: findings_lock(Finding.objects.filter(job_findings__job_id=job_id)), **fields)


def _notify_job_outcome(job: RemediationJob, *, repaired: list[int]) -> None:
    """``job.repaired`` (with what each finding recovered) or ``job.failed``
    to the cluster's webhook, sent after commit."""
    event = "job.repaired" if job.status == RemediationJob.Status.SUCCEEDED else "job.failed"
    findings = Finding.objects.filter(job_findings__job=job).select_related("topic").order_by("topic__name",
                                                                                            "partition")
    payload = {
        "event": event, "cluster": job.cluster.name, "group": job.group.group_id,
        "group_type": group_kind(job.group.type, job.group.group_id), "job": job.id, "kind": job.kind,
        "status": job.status, "reason": job.status_reason, "error": job.error,
        "findings": [
            {"id": f.id, "topic": f.topic.name, "partition": f.partition, "repaired": f.id in repaired,
             "recovered": f.recovered_messages if f.id in repaired else None,
             "redelivered": f.redelivered_messages if f.id in repaired else None}
            for f in findings
        ],
    }
    notifications_create(cluster=job.cluster, events=[(event, payload, None)])


def job_approve(*, user, job_id: int) -> RemediationJob:
    """Four-eyes approval: an approver other than the requester."""
    approver_require(user)
    job = RemediationJob.objects.select_related("requested_by").get(id=job_id)
    approval_require(user, what="a remediation", findings=_named(job.findings.all()), requested_by=job.requested_by)
    dispatch.queue_check()
    with transaction.atomic():
        if not job_transition(job_id=job_id, from_statuses=[RemediationJob.Status.REQUESTED],
                              to_status=RemediationJob.Status.APPROVED, actor=user,
                              approved_by=user, approved_at=timezone.now()):
            job.refresh_from_db()
            raise Conflict(f"job {job_id} is {job.status}, not waiting for approval")
        _enqueue_on_commit(job_id)
    return RemediationJob.objects.get(id=job_id)


def job_cancel(*, user, job_id: int, seen_status: str | None = None) -> RemediationJob:
    """Cancel a job that is not running yet; its findings stay open.

    ``seen_status``: the status the person saw (the job page sends it). The
    job is cancelled only from that status, so a cancel racing an approval of
    the same request loses (Conflict) instead of undoing it unseen."""
    approver_require(user)
    scope_require_act(user, _named(Finding.objects.filter(job_findings__job_id=job_id)))
    from_statuses = list(RemediationJob.CANCELLABLE)
    if seen_status is not None:
        from_statuses = [seen_status] if seen_status in from_statuses else []
    if not job_transition(job_id=job_id, from_statuses=from_statuses,
                          to_status=RemediationJob.Status.CANCELLED, actor=user,
                          status_reason=f"cancelled by {user.get_username()}"):
        job = RemediationJob.objects.get(id=job_id)
        if seen_status is not None and job.status != seen_status and job.status in RemediationJob.CANCELLABLE:
            raise Conflict(f"job {job_id} is {job.status} now, not {seen_status} as you saw it: "
                           "look again and cancel it if you still want to")
        raise Conflict(f"job {job_id} is {job.status}: only jobs not yet running can be cancelled")
    return RemediationJob.objects.get(id=job_id)


def job_retry(*, user, job_id: int) -> RemediationJob:
    """A failed job is retried as a new job linked to it, planned afresh."""
    approver_require(user)
    old = RemediationJob.objects.get(id=job_id)
    if old.status != RemediationJob.Status.FAILED:
        raise ValidationError(f"job {job_id} is {old.status}: only failed jobs can be retried")
    finding_ids = list(old.findings.values_list("id", flat=True))
    job = job_request(user=user, finding_ids=finding_ids, kind=old.kind, params=old.params)
    RemediationJob.objects.filter(id=job.id).update(retry_of=old)
    job.retry_of = old
    return job


def finding_dismiss(*, user, finding_id: int, reason: str) -> Finding:
    """Close a finding with a reason; the next polls no longer account it.

    Under the finding's lock: an unknown finding is FindingNotFound, a
    closed one or one with an active job (cancel it first) a Conflict."""
    approver_require(user)
    reason = reason_require(reason, what=DISMISSAL)
    now = timezone.now()
    with transaction.atomic():
        locked = findings_lock(Finding.objects.filter(id=finding_id))
        if not locked:
            raise FindingNotFound(f"no finding {finding_id}")
        finding_require_open(locked[0])
        acted = act_detail(user, scope_require_act(user, _named(Finding.objects.filter(id=finding_id))))
        active = finding_active_job(finding_id)
        if active is not None:
            raise Conflict(f"{active.kind} job {active.id} is {active.status} on finding {finding_id}: "
                           "cancel it (or let it finish) before dismissing")
        finding = Finding.objects.select_related("cluster", "group", "topic").get(id=finding_id)
        finding_close(finding=finding, cluster=finding.cluster, resolution=Finding.Resolution.DISMISSED,
                      reason=f"dismissed: {reason}", now=now, by=user, detail={"reason": reason, **acted})
        finding.refresh_from_db()
    return finding
