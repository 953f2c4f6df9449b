"""One finding's page and API answer: the finding with its cluster, group,
topic and generation, the jobs that worked on it, and its audit trail."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F, Q, QuerySet

from groups.domain.record_counts import COUNT_MAX_OFFSETS, CountedRange, count_due, group_records
from groups.domain.urgency import Retention
from groups.models import AuditEvent, Finding, FindingUrgency, RemediationJob
from groups.urgency_text import expiry_words, retention_words


def finding_get(*, finding_id: int) -> Finding:
    """The finding, open or closed; ``Finding.DoesNotExist`` when no row has the id."""
    return Finding.objects.select_related(
        "cluster", "group", "topic", "generation", "closed_by", "resolved_by_job",
    ).get(id=finding_id)


def findings_with_rows() -> QuerySet[Finding]:
    """Every finding with its group, topic and cluster, for a caller that scopes it (``visible_findings``)."""
    return Finding.objects.select_related("group", "topic", "cluster")


def finding_jobs_list(*, finding: Finding) -> QuerySet[RemediationJob]:
    """The jobs linked to the finding, newest first."""
    return (
        RemediationJob.objects.filter(job_findings__finding=finding)
        .select_related("requested_by", "approved_by")
        .order_by("-created_at", "-id")
    )


def finding_audit_events_list(*, finding: Finding, job_ids: list[int]) -> QuerySet[AuditEvent]:
    """Audit rows about the finding, oldest first: those naming it, those of
    the jobs in ``job_ids`` (its jobs), and a poll's rows written before they
    named the finding (its group, topic, partition and generation in ``detail``)."""
    about_it = Q(object_type="finding", object_id=str(finding.id))
    of_its_jobs = Q(object_type="job", object_id__in=[str(job_id) for job_id in job_ids])
    unnamed_poll_rows = Q(
        object_type="", cluster_id=finding.cluster_id, action__startswith="finding.",
        detail__contains={"group": finding.group.group_id, "topic": finding.topic.name,
                          "partition": finding.partition, "generation": finding.generation.number},
    )
    return (
        AuditEvent.objects.filter(about_it | of_its_jobs | unnamed_poll_rows)
        .select_related("actor")
        .order_by("at", "id")
    )


def finding_group_members(*, finding: Finding) -> list[dict]:
    """The group's members as of the last poll (client id, host, member id),
    each with ``holds``: whether its assignment has the finding's partition;
    the holder first."""
    where = [finding.topic.name, finding.partition]
    members = [
        {"client_id": str(member.get("client_id", "")), "host": str(member.get("host", "")),
         "member_id": str(member.get("member_id", "")),
         "holds": where in [list(item) for item in member.get("assignment") or []]}
        for member in finding.group.members or []
    ]
    return sorted(members, key=lambda m: (not m["holds"], m["client_id"], m["member_id"]))


def finding_counted_range(*, finding: Finding) -> CountedRange | None:
    """The finding's stored record count, None if its range was never counted."""
    if finding.records_start is None or finding.records_end is None:
        return None
    return CountedRange(finding.records_start, finding.records_end, finding.records_read_committed,
                        finding.records_read_uncommitted)


def findings_to_count(*, cluster_id: int, limit: int = 100) -> list[Finding]:
    """Open findings of the cluster whose backfill range has no count of
    itself yet (``record_counts.count_due``), oldest first, at most ``limit``."""
    rows = (
        Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True, backfill_start__isnull=False,
                               backfill_end__isnull=False)
        .exclude(records_start=F("backfill_start"), records_end=F("backfill_end"),
                 records_read_committed__isnull=False)
        .select_related("topic").order_by("id")
    )
    return [row for row in rows[: limit * 2] if count_due(
        start=row.backfill_start, end=row.backfill_end, counted=finding_counted_range(finding=row))][:limit]


def finding_record_counts(*, finding: Finding) -> dict:
    """What the finding page says of records in its backfill range: the
    count for the group's isolation (``group``, None until counted), both
    counts, and why there is none yet ("" once counted)."""
    counted = finding_counted_range(finding=finding)
    start, end = finding.backfill_start, finding.backfill_end
    isolation = finding.group.declared_isolation
    group = group_records(isolation=isolation, counted=counted, start=start, end=end)
    if start is None or end is None:
        why = "no range to count"
    elif end - start > COUNT_MAX_OFFSETS:
        why = f"a range of more than {COUNT_MAX_OFFSETS:,} offsets is not read to count it"
    elif counted is not None and (counted.start, counted.end) == (start, end) and counted.read_committed is None:
        why = "a transaction still holds records of the range open: counted once it ends"
    else:
        why = "" if group is not None else "not counted yet (the next poll asks for it)"
    return {"group": group, "isolation": isolation, "start": start, "end": end, "why": why,
            "read_committed": counted.read_committed if group is not None else None,
            "read_uncommitted": counted.read_uncommitted if group is not None else None}


def findings_for_urgency(*, cluster_id: int, limit: int = 500) -> list[Finding]:
    """Open findings of the cluster with something missed to lose to
    retention (every state but covered), those read longest ago (or never)
    first, at most ``limit``, with their topics."""
    return list(
        Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True).exclude(state=Finding.State.COVERED)
        .select_related("topic").order_by(F("urgency__read_at").asc(nulls_first=True), "id")[:limit]
    )


def finding_urgency_shown(*, finding: Finding, missed_start: int, now: datetime) -> dict | None:
    """What the finding page says of retention: None for a closed or covered
    finding (nothing left to lose); else the stored read (``read``: None
    before the first) in words, the expiry an estimate. ``missed_start``:
    the first offset of the finding's missed range (``missed_range_of``)."""
    if finding.closed_at is not None or finding.state == Finding.State.COVERED:
        return None
    read = FindingUrgency.objects.filter(finding=finding).first()
    if read is None:
        return {"read": None}
    retention = Retention(retention_ms=read.retention_ms, retention_bytes=read.retention_bytes,
                          cleanup_policy=read.cleanup_policy)
    start = missed_start
    return {
        "read": read, "start": start, "error": read.error,
        "retention": retention_words(retention) if read.retention_ms is not None or read.cleanup_policy else "",
        "expiry": expiry_words(retention=retention, first_timestamp=read.first_timestamp, now=now),
        # The first stored record is past the missed start: what was before it is gone.
        "gone_before": read.first_offset if read.first_offset is not None and read.first_offset > start else None,
    }
