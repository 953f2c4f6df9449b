"""How findings leave the open list (DESIGN.md section 6): repaired by a
verified job, dismissed by a person, or expired when retention took the
range. Each way out is final and audited.

Approve, dismiss and cancel exclude each other through one rule: every one of
them first locks the rows of the findings it touches (``findings_lock``, in
id order, so two actions never deadlock), then checks what it needs and
writes, in one transaction. The second of two concurrent actions sees what
the first wrote and raises ``Conflict`` (the API's 409, a message on the page).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from groups.domain.lifecycle import Recovery, backfill_recovery, reset_recovery, sink_description
from groups.domain.planning import MissedRange
from groups.domain.reasons import ReasonRefused, person_reason
from groups.models import Cluster, Finding, JobFinding, RemediationJob
from groups.services.audit import audit_record


class Conflict(Exception):
    """The action lost to another one on the same finding or job (or came
    after it): nothing was written; the message says what happened instead."""


class FindingNotFound(ValidationError):
    """No finding has this id (a closed one still exists). A ValidationError,
    so pages show it as a form error; the API answers 404."""


def reason_require(reason: object, *, what: str) -> str:
    """A person's reason for ``what`` (a dismissal, a refusal) as stored
    (``groups.domain.reasons.person_reason``); a reason that cannot be is a
    ValidationError saying why, before anything is written."""
    try:
        return person_reason(reason, what=what)
    except ReasonRefused as refused:
        raise ValidationError(str(refused)) from None


def findings_lock(queryset: QuerySet[Finding]) -> list[Finding]:
    """Lock the findings' rows until the transaction ends, in id order.

    ``FOR NO KEY UPDATE``: it excludes the other lifecycle actions and a poll's
    write, but not a row inserted elsewhere that merely refers to a finding."""
    return list(queryset.select_for_update(no_key=True, of=("self",)).order_by("id"))


def finding_close(*, finding: Finding, cluster: Cluster, resolution: str, reason: str, now: datetime, by=None,
                  detail: dict | None = None, **fields) -> bool:
    """The one write of every way out (repaired, partial, dismissed,
    expired): closed once (compare-and-set on ``closed_at``), with its reason,
    and audited as ``finding.<resolution>`` by ``by`` (None: the system).
    ``fields``: what else the way out records (the job, what it recovered;
    ``closed_by`` when the person named differs from the actor). Returns
    whether this call closed it."""
    fields.setdefault("closed_by", by)
    closed = Finding.objects.filter(id=finding.id, closed_at__isnull=True).update(
        resolution=resolution, closed_at=now, closed_reason=reason, updated_at=now, **fields)
    if closed:
        audit_record(action=f"finding.{resolution}", actor=by, cluster=cluster, object_type="finding",
                     object_id=finding.id, detail={"group": finding.group.group_id, "topic": finding.topic.name,
                                                   "partition": finding.partition, **(detail or {})})
    return bool(closed)


def findings_expire(*, cluster: Cluster, closing: Iterable[tuple[Finding, str]], now: datetime) -> None:
    """Expiry, the poll's way out: the topic was deleted or recreated, or
    retention deleted the whole missed range. ``closing``: (finding, reason)."""
    for finding, reason in closing:
        finding_close(finding=finding, cluster=cluster, resolution=Finding.Resolution.EXPIRED, reason=reason, now=now,
                      detail={"reason": reason})


def finding_require_open(finding: Finding) -> None:
    if finding.closed_at is not None:
        raise Conflict(f"finding {finding.id} is already closed: {finding.closed_reason or finding.resolution}")


def finding_active_job(finding_id: int) -> RemediationJob | None:
    link = JobFinding.objects.filter(finding_id=finding_id, active=True).select_related("job").first()
    return link.job if link else None


def missed_range_of(finding: Finding) -> MissedRange:
    """What the finding proved missed, for planning a backfill or judging a repair."""
    return MissedRange(
        topic=finding.topic.name, partition=finding.partition, state=finding.state,
        start=finding.backfill_start if finding.backfill_start is not None
        else max(finding.log_start_offset, finding.first_log_start),
        definite_end=finding.first_log_start + finding.missed_definite, bound_end=finding.backfill_end,
        likely_start=finding.likely_start, high_watermark=finding.high_watermark,
    )


def _recoveries(job: RemediationJob, findings: Iterable[Finding]) -> dict[int, Recovery]:
    """Per finding, what the job's verified result says it recovered; a
    finding whose partition the result does not name gets nothing (stays open)."""
    rows = {(row["topic"], row["partition"]): row for row in (job.result or {}).get("partitions", [])}
    recoveries = {}
    for finding in findings:
        where = (finding.topic.name, finding.partition)
        row = rows.get(where)
        if row is None:
            continue
        # The sound range as the finding stands now: a first commit seen while the job ran counts.
        missed = missed_range_of(finding)
        if job.kind == RemediationJob.Kind.RESET:
            recoveries[finding.id] = reset_recovery(
                job_id=job.id, before=row["before"], after=row["after"], missed_start=missed.start,
                missed_end=missed.bound_end if missed.bound_end is not None else missed.definite_end,
            )
        else:
            # A backfill's plan has one [start, end) row per partition its result names.
            (plan_row,) = [r for r in job.plan if (r["topic"], r["partition"]) == where]
            recoveries[finding.id] = backfill_recovery(
                job_id=job.id, partition_report=row, destination=sink_description(job.result.get("sink") or {}),
                planned=(plan_row["start"], plan_row["end"]), sound=(missed.start, missed.bound_end),
            )
    return recoveries


def findings_resolve_by_job(*, job: RemediationJob, now: datetime) -> list[int]:
    """After ``job`` succeeded (its result read back and verified): close its
    open findings as repaired when the job covered the finding's whole sound
    range, else as repaired to an estimate (``partial``, saying what is not
    covered), with what each recovered, and audit each.

    A reset counts as verified only with ``verified`` in its result; a
    succeeded backfill always is (its executor fails on any unexplained
    difference). Findings already closed meanwhile (expired) keep their way
    out. The caller holds the findings' locks. Returns the ids repaired."""
    if job.kind == RemediationJob.Kind.RESET and not (job.result or {}).get("verified"):
        return []
    findings = findings_lock(
        Finding.objects.filter(job_findings__job=job, closed_at__isnull=True).select_related("topic", "group")
    )
    by_id = {finding.id: finding for finding in findings}
    recoveries = _recoveries(job, findings)
    for finding_id, recovery in recoveries.items():
        finding = by_id[finding_id]
        resolution = Finding.Resolution.REPAIRED if recovery.complete else Finding.Resolution.PARTIAL
        # Closed in the job approver's name; audited as the system's act (the job's verified result).
        finding_close(finding=finding, cluster=job.cluster, resolution=resolution, reason=recovery.reason, now=now,
                      detail={"job": job.id, "kind": job.kind, "recovered": recovery.recovered,
                              "redelivered": recovery.redelivered, "reason": recovery.reason},
                      closed_by=job.approved_by, resolved_by_job=job, recovered_messages=recovery.recovered,
                      redelivered_messages=recovery.redelivered)
    return sorted(recoveries)
