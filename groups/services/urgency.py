"""Stores what a worker read of an open finding's urgency (``tasks.urgency``):
the topic's retention and the first missed record still stored, with the
estimate of when retention may delete it (``groups.domain.urgency``)."""

from __future__ import annotations

from datetime import datetime

from groups.domain.urgency import Retention, expiry_estimate_at
from groups.models import FindingUrgency


def finding_urgency_record(*, finding_id: int, retention: Retention, timestamp_type: str, first_offset: int | None,
                           first_timestamp: datetime | None, now: datetime) -> None:
    """Write the read (one row a finding, replaced by each read)."""
    FindingUrgency.objects.update_or_create(finding_id=finding_id, defaults={
        "read_at": now, "retention_ms": retention.retention_ms, "retention_bytes": retention.retention_bytes,
        "cleanup_policy": retention.cleanup_policy, "timestamp_type": timestamp_type, "first_offset": first_offset,
        "first_timestamp": first_timestamp,
        "expires_at": expiry_estimate_at(retention=retention, first_timestamp=first_timestamp), "error": "",
    })


def finding_urgency_failed(*, finding_id: int, error: str, now: datetime) -> None:
    """A read that failed: say why and when, keeping the last good read's values."""
    updated = FindingUrgency.objects.filter(finding_id=finding_id).update(read_at=now, error=error)
    if not updated:
        FindingUrgency.objects.create(finding_id=finding_id, read_at=now, error=error)
