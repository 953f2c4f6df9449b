"""Is what the pages show current? One cluster's freshness, from its stored
poll times: a pure rule, given ``now``.

A cluster is **unreachable** when its last poll failed, **late** when no poll
has succeeded for ``late_after`` (beat stopped, workers busy or gone, a poll
slower than its interval), **waiting** when it has never been polled, and
**current** otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Freshness = Literal["current", "late", "unreachable", "waiting"]
# Polls may run late by this many intervals before the pages say so: one
# missed beat tick is noise, three are a stopped poller.
LATE_AFTER_INTERVALS = 3
LATE_AFTER_AT_LEAST = timedelta(seconds=30)


def late_after(*, poll_interval: timedelta) -> timedelta:
    """How long without a successful poll before a cluster counts as late."""
    return max(poll_interval * LATE_AFTER_INTERVALS, LATE_AFTER_AT_LEAST)


@dataclass(frozen=True)
class ClusterFreshness:
    name: str
    freshness: Freshness
    last_success_at: datetime | None
    error: str

    @property
    def needs_attention(self) -> bool:
        return self.freshness in ("late", "unreachable")


def cluster_freshness(
    *, name: str, unreachable: bool, last_success_at: datetime | None, first_seen_at: datetime, error: str,
    now: datetime, poll_interval: timedelta,
) -> ClusterFreshness:
    """The freshness of one enabled cluster.

    ``unreachable``: its last poll failed. ``last_success_at``: the end of its
    last successful poll, or None. ``first_seen_at``: when it was registered,
    so a new cluster is late only once its first poll is overdue.
    """
    limit = late_after(poll_interval=poll_interval)
    if unreachable:
        freshness: Freshness = "unreachable"
    elif last_success_at is None:
        freshness = "late" if now - first_seen_at > limit else "waiting"
    elif now - last_success_at > limit:
        freshness = "late"
    else:
        freshness = "current"
    return ClusterFreshness(name=name, freshness=freshness, last_success_at=last_success_at,
                            error=error if unreachable else "")
