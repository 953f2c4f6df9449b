"""How long retention leaves a finding's missed records to repair: an
estimate from the topic's retention and the first missed record's
timestamp, given ``now``.

Kafka deletes a log segment once its newest record is older than
``retention.ms`` (or the log is over ``retention.bytes``), never a single
record, and a record's timestamp is the producer's unless the topic says
LogAppendTime. So ``first timestamp + retention.ms`` is the earliest time
retention may delete the first missed record, not when it will: an
estimate, said so on every page. Size-bound retention depends on what is
written next, which time alone cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# Kafka's word for "no limit" in retention.ms and retention.bytes.
UNLIMITED = -1


@dataclass(frozen=True)
class Retention:
    """A topic's retention as its configs say (None: the broker gave no value)."""

    retention_ms: int | None
    retention_bytes: int | None
    cleanup_policy: str

    @property
    def deletes(self) -> bool:
        """Whether retention deletes old segments at all (``delete`` in the cleanup policy)."""
        return "delete" in self.cleanup_policy.split(",") or not self.cleanup_policy

    @property
    def by_time(self) -> bool:
        return self.deletes and self.retention_ms is not None and self.retention_ms != UNLIMITED

    @property
    def by_size(self) -> bool:
        return self.deletes and self.retention_bytes is not None and self.retention_bytes != UNLIMITED


def expiry_estimate_at(*, retention: Retention, first_timestamp: datetime | None) -> datetime | None:
    """The earliest time time-based retention may delete the record stamped
    ``first_timestamp``; None when it cannot be estimated from time (no
    time limit, no deletion, no timestamp)."""
    if first_timestamp is None or not retention.by_time:
        return None
    return first_timestamp + timedelta(milliseconds=retention.retention_ms)
