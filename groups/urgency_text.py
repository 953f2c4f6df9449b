"""The words pages use for a finding's urgency (``groups.domain.urgency``):
the retention in a sentence and when it may delete the first missed record,
always called an estimate. Pure, no Django."""

from __future__ import annotations

from datetime import datetime

from groups.domain.urgency import UNLIMITED, Retention, expiry_estimate_at
from groups.text import duration_words


def retention_words(retention: Retention) -> str:
    """The retention in a sentence: '7 d', 'no time limit', 'compaction only'."""
    if not retention.deletes:
        return f"never deleted by age or size (cleanup.policy={retention.cleanup_policy}: compaction only)"
    parts = []
    if retention.retention_ms is not None:
        parts.append("no time limit" if retention.retention_ms == UNLIMITED
                     else f"{duration_words(retention.retention_ms / 1000)} (retention.ms={retention.retention_ms})")
    if retention.retention_bytes is not None:
        parts.append("no size limit" if retention.retention_bytes == UNLIMITED
                     else f"at most {retention.retention_bytes:,} bytes a partition (retention.bytes)")
    return ", ".join(parts) or "not given by the broker"


def expiry_words(*, retention: Retention, first_timestamp: datetime | None, now: datetime) -> str:
    """When retention may delete the first missed record, in words that say it is an estimate."""
    if not retention.deletes:
        return "retention does not delete this topic's records (compaction only: older values of a key may go)"
    at = expiry_estimate_at(retention=retention, first_timestamp=first_timestamp)
    if at is None:
        if retention.by_size:
            return ("cannot be estimated from time alone: only retention.bytes limits this topic, so it depends on "
                    "how much is written next")
        if first_timestamp is None and retention.by_time:
            return "not estimated: the first missed record's timestamp is not known"
        return "retention keeps it: the topic has no time or size limit"
    size_too = "; retention.bytes may delete it sooner" if retention.by_size else ""
    if at <= now:
        return (f"may be deleted already: its age passed retention.ms {duration_words((now - at).total_seconds())} ago "
                f"(estimate; Kafka deletes whole segments, so it can stay longer){size_too}")
    return (f"expires in ~{duration_words((at - now).total_seconds())} (estimate: the earliest retention.ms may delete it; "
            f"Kafka deletes whole segments, so it can stay longer){size_too}")


def expiry_short(*, expires_at: datetime | None, now: datetime) -> str:
    """The triage's few words: 'expires in ~5 h (estimate)'; '' without an estimate."""
    if expires_at is None:
        return ""
    if expires_at <= now:
        return "may be deleted already (estimate)"
    return f"expires in ~{duration_words((expires_at - now).total_seconds())} (estimate)"
