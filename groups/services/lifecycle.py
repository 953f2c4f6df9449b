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

from django.db.models import QuerySet

from groups.domain.lifecycle import Recovery, backfill_recovery, reset_recovery, sink_description
from groups.models import Finding, JobFinding, RemediationJob
from groups.services.audit import audit_record


class Conflict(Exception):
    """The action lost to another one on the same finding or job (or came
    after it): nothing was written; the message says what happened instead."""


def findings_lock(queryset: QuerySet[Finding]) -> list[Finding]:
    """Lock the findings' rows until the transaction ends, in id order.

    ``FOR NO KEY UPDATE``: it excludes the other lifecycle actions and a poll's
    write, but not a row inserted elsewhere that merely refers to a finding."""
    return list(queryset.select_for_update(no_key=True, of=("self",)).order_by("id"))


def finding_require_open(finding: Finding) -> None:
    if finding.closed_at is not None:
        raise Conflict(f"finding {finding.id} is already closed: {finding.closed_reason or finding.resolution}")


def finding_active_job(finding_id: int) -> RemediationJob | None:
    link = JobFinding.objects.filter(finding_id=finding_id, active=True).select_related("job").first()
    return link.job if link else None


def _recoveries(job: RemediationJob, findings: Iterable[Finding]) -> dict[int, Recovery]:
    """Per finding, what the job's verified result says it recovered; a
    finding whose partition the result does not name gets nothing (stays open)."""
    rows = {(row["topic"], row["partition"]): row for row in (job.result or {}).get("partitions", [])}
    recoveries = {}
    for finding in findings:
        row = rows.get((finding.topic.name, finding.partition))
        if row is None:
            continue
        if job.kind == RemediationJob.Kind.RESET:
            recoveries[finding.id] = reset_recovery(
                job_id=job.id, before=row["before"], after=row["after"],
                missed_start=finding.backfill_start, missed_end=finding.backfill_end,
            )
        else:
            recoveries[finding.id] = backfill_recovery(
                job_id=job.id, partition_report=row, destination=sink_description(job.result.get("sink") or {})
            )
    return recoveries


def findings_resolve_by_job(*, job: RemediationJob, now: datetime) -> list[int]:
    """After ``job`` succeeded (its result read back and verified): close its
    open findings as repaired, with what each recovered, and audit each.

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
        Finding.objects.filter(id=finding_id).update(
            resolution=Finding.Resolution.REPAIRED, closed_at=now, closed_reason=recovery.reason,
            closed_by=job.approved_by, resolved_by_job=job, recovered_messages=recovery.recovered,
            redelivered_messages=recovery.redelivered, updated_at=now,
        )
        audit_record(action="finding.repaired", actor=None, cluster=job.cluster, object_type="finding",
                     object_id=finding_id, detail={
                         "group": finding.group.group_id, "topic": finding.topic.name,
                         "partition": finding.partition, "job": job.id, "kind": job.kind,
                         "recovered": recovery.recovered, "redelivered": recovery.redelivered,
                         "reason": recovery.reason})
    return sorted(recoveries)
