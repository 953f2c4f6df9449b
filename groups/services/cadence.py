"""The watch's own pulse (issue 42): every watcher tick that reached a worker
is counted in Redis with when it arrived and whether it ran, so a stopped or
late watch shows on /metrics (and in the busy-workers fault test) instead of
being inferred from silence. One counter and a short list per cluster."""

from __future__ import annotations

from groups.services.redis_client import redis_client

# How many recent tick arrivals are kept per cluster (about two minutes at one a second).
KEPT_ARRIVALS = 120


def _key(cluster_id: int, what: str) -> str:
    return f"gapwatch:ticks:{cluster_id}:{what}"


def tick_record(*, cluster_id: int, arrived: float, ran: bool) -> None:
    """One tick arrived at ``arrived`` (epoch seconds); ``ran``: it held the
    cluster's lock and observed, else it skipped (a poll held the lock)."""
    pipe = redis_client().pipeline()
    pipe.incr(_key(cluster_id, "ran" if ran else "skipped"))
    pipe.set(_key(cluster_id, "last"), repr(arrived))
    pipe.lpush(_key(cluster_id, "arrivals"), repr(arrived))
    pipe.ltrim(_key(cluster_id, "arrivals"), 0, KEPT_ARRIVALS - 1)
    pipe.execute()


def tick_counts(*, cluster_id: int) -> dict:
    """``{"ran", "skipped", "last"}``: ticks that ran and skipped so far, and
    the last one's arrival (epoch seconds, None before any); ``arrivals``: the
    newest KEPT_ARRIVALS arrivals, oldest first."""
    client = redis_client()
    ran, skipped, last = client.mget(_key(cluster_id, "ran"), _key(cluster_id, "skipped"), _key(cluster_id, "last"))
    arrivals = [float(a) for a in reversed(client.lrange(_key(cluster_id, "arrivals"), 0, -1))]
    return {"ran": int(ran or 0), "skipped": int(skipped or 0), "last": float(last) if last else None,
            "arrivals": arrivals}
