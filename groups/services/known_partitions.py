"""Known-partition sets in Redis, read by consumer-side guards.

Which partitions are known is computed by the pure
``groups.domain.known_partitions.known_partition_sets``; this module writes and
reads the sets.

Key layout (one Redis set per cluster, topic and group):

    gapwatch:known-partitions:<cluster>:<topic>:<group id>

Members are partition ids (decimal strings). The set holds the partitions that
existed at the group's current generation: every partition of the topic except
the new ones the group has not committed on yet (findings, open or dismissed,
without a commit). A (topic, group) pair the poller sees for the first time
gets no set from it. A guard seeing a partition with no commit that is NOT in the set
knows it is new and starts it at the beginning. Cluster names are slugs and
topic names cannot contain ':', so everything after the third ':' is the group
id, whatever it contains. Sets expire after KNOWN_SET_TTL_SECONDS without a
poll refreshing them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import redis
from django.conf import settings

log = logging.getLogger(__name__)
PREFIX = "gapwatch:known-partitions"
KNOWN_SET_TTL_SECONDS = 7 * 24 * 3600


def key(*, cluster: str, topic: str, group_id: str) -> str:
    return f"{PREFIX}:{cluster}:{topic}:{group_id}"


def publish(*, cluster: str, sets: dict[tuple[str, str], frozenset[int]], new_lineages: Iterable[str] = ()) -> None:
    """Replace each set atomically (write a temporary key, then RENAME), after
    dropping every set and guard report of topics deleted and recreated: their
    old partitions and starts mean nothing for the new lineage."""
    new_lineages = list(new_lineages)
    if not sets and not new_lineages:
        return
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    try:
        for topic in new_lineages:
            for prefix in (PREFIX, GUARD_PREFIX):
                stale = list(client.scan_iter(match=f"{prefix}:{cluster}:{topic}:*", count=500))
                if stale:
                    client.delete(*stale)
        pipe = client.pipeline(transaction=False)
        for (topic, group_id), partitions in sets.items():
            target = key(cluster=cluster, topic=topic, group_id=group_id)
            if not partitions:
                pipe.delete(target)
                continue
            staging = f"{target}:staging"
            pipe.delete(staging)
            pipe.sadd(staging, *sorted(partitions))
            pipe.rename(staging, target)
            pipe.expire(target, KNOWN_SET_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError as error:
        # Guards fall back to their own bookkeeping; the poll itself succeeded.
        log.warning("could not publish known-partition sets for cluster %s: %s", cluster, error)


def read(*, cluster: str, topic: str, group_id: str) -> frozenset[int]:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return frozenset(int(member) for member in client.smembers(key(cluster=cluster, topic=topic, group_id=group_id)))


GUARD_PREFIX = "gapwatch:guard-starts"


def guard_key(*, cluster: str, topic: str, group_id: str) -> str:
    """Hash written by consumer-side guards: partition id -> the offset the guard
    started that new partition at (HSETNX: the first start wins)."""
    return f"{GUARD_PREFIX}:{cluster}:{topic}:{group_id}"


def read_guard_starts(*, cluster: str, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str, int], int]:
    """(topic, group id, partition) -> reported start offset, for the given (topic, group id) pairs.

    Redis being unreachable only means no reports this poll: findings then
    keep their estimate, and the next poll tries again.
    """
    pairs = sorted(set(pairs))
    if not pairs:
        return {}
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    try:
        pipe = client.pipeline(transaction=False)
        for topic, group_id in pairs:
            pipe.hgetall(guard_key(cluster=cluster, topic=topic, group_id=group_id))
        answers = pipe.execute()
    except redis.RedisError as error:
        log.warning("could not read guard reports for cluster %s: %s", cluster, error)
        return {}
    starts = {}
    for (topic, group_id), answer in zip(pairs, answers):
        for partition, offset in answer.items():
            try:
                starts[(topic, group_id, int(partition))] = int(offset)
            except ValueError:
                log.warning("ignoring malformed guard report %r=%r for %s/%s", partition, offset, topic, group_id)
    return starts
