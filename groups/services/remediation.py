"""Writes for remediations: request, approve, cancel, retry, dismiss, and the
compare-and-set transitions that executors (offset reset, Spark backfill) use.

Views and the API call these; permissions are checked here too, so no path
can skip them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from groups.services.audit import audit_record
from groups.models import Finding, JobFinding, RemediationJob
from groups.domain.planning import PartitionPosition, PlanError, ResetTarget, plan_backfill, plan_reset

log = logging.getLogger(__name__)
APPROVE_PERMISSION = "groups.approve_remediation"
# A group's default sink (group settings); a job may also use a Python handler,
# one of the dotted paths an administrator lists in BACKFILL_HANDLERS.
SINKS = ("parquet", "kafka")
JOB_SINKS = (*SINKS, "handler")
# Kafka's own rule for topic names.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class DuplicateJob(Exception):
    """An active job of this kind already covers one of the findings."""

    def __init__(self, job: RemediationJob) -> None:
        super().__init__(f"{job.kind} job {job.id} is already {job.status} for these findings")
        self.job = job


def _require_approver(user) -> None:
    if not (user and user.is_authenticated and user.has_perm(APPROVE_PERMISSION)):
        raise PermissionDenied("approving remediations needs the approver role")


def _open_findings_of_one_group(finding_ids: Iterable[int]) -> list[Finding]:
    ids = sorted(set(int(i) for i in finding_ids))
    if not ids:
        raise ValidationError("select at least one finding")
    findings = list(
        Finding.objects.filter(id__in=ids, closed_at__isnull=True).select_related("cluster", "group", "topic")
    )
    if len(findings) != len(ids):
        raise ValidationError("some findings do not exist or are closed")
    if len({(f.cluster_id, f.group_id) for f in findings}) != 1:
        raise ValidationError("a remediation covers findings of one group on one cluster")
    return findings


def positions_of(findings: list[Finding]) -> list[PartitionPosition]:
    """Offsets as of the last poll; the executor checks them again before acting."""
    return [
        PartitionPosition(topic=f.topic.name, partition=f.partition, log_start=f.log_start_offset,
                          high_watermark=f.high_watermark, committed=f.committed_offset)
        for f in findings
    ]


def reset_preview(*, finding_ids: Iterable[int], target_kind: str, target_value: str | None) -> dict:
    """What a reset would do, from stored state (no Kafka call): per partition
    current and planned offset, messages re-delivered or skipped, and whether
    the group was empty at the last poll."""
    findings = _open_findings_of_one_group(finding_ids)
    try:
        target = ResetTarget.parse(kind=target_kind, value=target_value)
        # A timestamp is resolved against the broker when the job runs.
        plan = [] if target.kind == "timestamp" else [
            p.as_dict() for p in plan_reset(target=target, positions=positions_of(findings))
        ]
    except PlanError as error:
        raise ValidationError(str(error)) from None
    group = findings[0].group
    return {
        "findings": findings, "group": group, "target": {"kind": target.kind, "value": target.value}, "plan": plan,
        "group_empty": group.state in ("Empty", "Dead") or group.member_count == 0,
        "group_state": group.state, "member_count": group.member_count, "as_of": group.last_seen_at,
    }


def backfill_preview(*, finding_ids: Iterable[int], sink: str, replay_topic: str = "", handler: str = "") -> dict:
    """The plan of a backfill and where it delivers: ``params`` are what the
    job stores (sink, and the replay topic or handler chosen for this job)."""
    findings = _open_findings_of_one_group(finding_ids)
    if not isinstance(sink, str) or sink not in JOB_SINKS:
        raise ValidationError(f"unknown sink {sink!r}: use parquet, kafka or handler")
    if not isinstance(replay_topic, str) or not isinstance(handler, str):
        raise ValidationError("replay_topic and handler must be text")
    try:
        ranges = plan_backfill(
            ranges=[(f.topic.name, f.partition, f.backfill_start, f.backfill_end) for f in findings]
        )
    except PlanError as error:
        raise ValidationError(str(error)) from None
    group = findings[0].group
    params: dict = {"sink": sink}
    if sink == "kafka":
        chosen = replay_topic.strip()
        if chosen:
            if not TOPIC_NAME.match(chosen):
                raise ValidationError("A replay topic name has 1–249 letters, digits, dots, underscores or dashes.")
            params["replay_topic"] = chosen
        sources = sorted({f.topic.name for f in findings})
        targets = {source: chosen or group.replay_topic or f"{source}.replay" for source in sources}
        if any(source == target for source, target in targets.items()):
            raise ValidationError("The replay topic must not be the topic the records come from.")
        destination = ", ".join(sorted(set(targets.values())))
    elif sink == "handler":
        if handler not in settings.BACKFILL_HANDLERS:
            allowed = ", ".join(settings.BACKFILL_HANDLERS) or "none is configured"
            raise ValidationError(f"Choose a handler listed in BACKFILL_HANDLERS ({allowed}).")
        params["handler"] = handler
        destination = handler
    else:
        destination = f"{settings.BACKFILL_OUTPUT}/<job id>/"
    return {"findings": findings, "group": group, "sink": sink, "params": params, "destination": destination,
            "plan": [r.as_dict() for r in ranges], "total": sum(r.count for r in ranges)}


def job_request(*, user, finding_ids: Iterable[int], kind: str, params: dict) -> RemediationJob:
    """Create one job for the findings: ``approved`` at once, or ``requested``
    when FOUR_EYES is on (then another approver must approve it).

    1. Check the permission and plan from stored state (bad input: ValidationError).
    2. Insert the job and its active finding links in one transaction; the
       partial unique constraint turns a concurrent duplicate into DuplicateJob.
    3. Audit, and enqueue the job after commit when approved.
    """
    _require_approver(user)
    if kind == RemediationJob.Kind.RESET:
        preview = reset_preview(finding_ids=finding_ids, target_kind=params.get("target", "earliest"),
                                target_value=params.get("value"))
        params = {"target": preview["target"]["kind"], "value": preview["target"]["value"]}
    elif kind == RemediationJob.Kind.BACKFILL:
        preview = backfill_preview(finding_ids=finding_ids, sink=params.get("sink", "parquet"),
                                   replay_topic=params.get("replay_topic", ""), handler=params.get("handler", ""))
        params = preview["params"]
    else:
        raise ValidationError(f"unknown remediation kind {kind!r}")
    findings = preview["findings"]
    four_eyes = settings.FOUR_EYES
    try:
        with transaction.atomic():
            job = RemediationJob.objects.create(
                cluster=findings[0].cluster, group=findings[0].group, kind=kind,
                status=RemediationJob.Status.REQUESTED if four_eyes else RemediationJob.Status.APPROVED,
                params=params, plan=preview["plan"], requested_by=user,
                approved_by=None if four_eyes else user,
            )
            if not four_eyes:
                # Requested and approved in one act: one moment.
                job.approved_at = job.created_at
                job.save(update_fields=["approved_at"])
            JobFinding.objects.bulk_create(JobFinding(job=job, finding=f, kind=kind) for f in findings)
            audit_record(action="job.requested", actor=user, cluster=job.cluster, object_type="job", object_id=job.id,
                         detail={"kind": kind, "group": job.group.group_id, "params": params,
                                 "findings": [f.id for f in findings]})
            if not four_eyes:
                audit_record(action="job.approved", actor=user, cluster=job.cluster, object_type="job",
                             object_id=job.id, detail={"from": None, "to": "approved"})
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
    from tasks.jobs import run_remediation_job

    transaction.on_commit(lambda: run_remediation_job.delay(job_id))


def job_transition(*, job_id: int, from_statuses: Iterable[str], to_status: str, actor=None, **fields) -> bool:
    """Compare-and-set: move the job only if it is in one of ``from_statuses``.

    Returns False (and changes nothing) when another request or worker moved it
    first. Finishing a job frees its findings for a new job of the same kind.
    """
    from_statuses = list(from_statuses)
    now = timezone.now()
    if to_status == RemediationJob.Status.RUNNING:
        fields.setdefault("started_at", now)
    if to_status in RemediationJob.FINISHED:
        fields.setdefault("finished_at", now)
    with transaction.atomic():
        moved = RemediationJob.objects.filter(id=job_id, status__in=from_statuses).update(
            status=to_status, updated_at=now, **fields
        )
        if not moved:
            return False
        if to_status in RemediationJob.FINISHED:
            JobFinding.objects.filter(job_id=job_id).update(active=False)
        job = RemediationJob.objects.select_related("cluster").get(id=job_id)
        detail = {"to": to_status}
        if fields.get("status_reason"):
            detail["reason"] = fields["status_reason"]
        if fields.get("error"):
            detail["error"] = fields["error"][:500]
        audit_record(action=f"job.{to_status}", actor=actor, cluster=job.cluster, object_type="job",
                     object_id=job_id, detail=detail)
    return True


def job_approve(*, user, job_id: int) -> RemediationJob:
    """Four-eyes approval: an approver other than the requester."""
    _require_approver(user)
    job = RemediationJob.objects.get(id=job_id)
    if settings.FOUR_EYES and job.requested_by_id == user.id:
        raise PermissionDenied("four-eyes: the person who requested a remediation cannot approve it")
    with transaction.atomic():
        if not job_transition(job_id=job_id, from_statuses=[RemediationJob.Status.REQUESTED],
                              to_status=RemediationJob.Status.APPROVED, actor=user,
                              approved_by=user, approved_at=timezone.now()):
            raise ValidationError(f"job {job_id} is {job.status}, not waiting for approval")
        _enqueue_on_commit(job_id)
    return RemediationJob.objects.get(id=job_id)


def job_cancel(*, user, job_id: int) -> RemediationJob:
    _require_approver(user)
    if not job_transition(job_id=job_id, from_statuses=RemediationJob.CANCELLABLE,
                          to_status=RemediationJob.Status.CANCELLED, actor=user,
                          status_reason=f"cancelled by {user.get_username()}"):
        job = RemediationJob.objects.get(id=job_id)
        raise ValidationError(f"job {job_id} is {job.status}: only jobs not yet running can be cancelled")
    return RemediationJob.objects.get(id=job_id)


def job_retry(*, user, job_id: int) -> RemediationJob:
    """A failed job is retried as a new job linked to it, planned afresh."""
    _require_approver(user)
    old = RemediationJob.objects.get(id=job_id)
    if old.status != RemediationJob.Status.FAILED:
        raise ValidationError(f"job {job_id} is {old.status}: only failed jobs can be retried")
    finding_ids = list(old.findings.values_list("id", flat=True))
    job = job_request(user=user, finding_ids=finding_ids, kind=old.kind, params=old.params)
    RemediationJob.objects.filter(id=job.id).update(retry_of=old)
    job.retry_of = old
    return job


def finding_dismiss(*, user, finding_id: int, reason: str) -> Finding:
    """Close a finding with a reason; the next polls no longer account it."""
    _require_approver(user)
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError("a dismissal needs a reason")
    now = timezone.now()
    with transaction.atomic():
        moved = Finding.objects.filter(id=finding_id, closed_at__isnull=True).update(
            closed_at=now, closed_reason=f"dismissed: {reason[:1000]}", closed_by=user, updated_at=now
        )
        if not moved:
            raise ValidationError("the finding does not exist or is already closed")
        finding = Finding.objects.select_related("cluster", "group", "topic").get(id=finding_id)
        audit_record(action="finding.dismissed", actor=user, cluster=finding.cluster, object_type="finding",
                     object_id=finding_id, detail={"group": finding.group.group_id, "topic": finding.topic.name,
                                                   "partition": finding.partition, "reason": reason[:1000]})
    return finding
