"""Known-partition sets in Redis, read by consumer-side guards.

Which partitions are known is computed by the pure
``groups.domain.known_partitions.known_partition_sets``; this module writes and
reads the sets.

The key layout is the guard's (``gapwatch_guard.keys``: one home for the
writer here and the guards that read): one set per cluster, topic and group,
members are partition ids. The set holds the partitions that existed at the
group's current generation: every partition of the topic except the new ones
the group has not committed on yet (findings, open or dismissed, without a
commit). A (topic, group) pair the poller sees for the first time gets no set
from it. A guard seeing a partition with no commit that is NOT in the set
knows it is new and starts it at the beginning. Sets expire after
KNOWN_SET_TTL_SECONDS without a poll refreshing them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import redis
from groups.services.redis_client import redis_client
from gapwatch_guard.keys import (
    GUARD_STARTS_PREFIX,
    KNOWN_PARTITIONS_PREFIX,
    guard_starts_key,
    known_partitions_key,
)

log = logging.getLogger(__name__)
KNOWN_SET_TTL_SECONDS = 7 * 24 * 3600
# A set this process published unchanged is written again only after this
# long: at 3,000 groups, rewriting every set every poll was 0.7 s of the
# poll's write. Within it, a set lost from Redis (a restart without
# persistence) stays missing, and guards use their own bookkeeping meanwhile.
REPUBLISH_SECONDS = 600.0
# cluster -> (topic, group id) -> (partitions, monotonic time published): what this process wrote.
_published: dict[str, dict[tuple[str, str], tuple[frozenset[int], float]]] = {}


def publish(*, cluster: str, sets: dict[tuple[str, str], frozenset[int]], new_lineages: Iterable[str] = ()) -> None:
    """Replace each set atomically (write a temporary key, then RENAME), after
    dropping every set and guard report of topics deleted and recreated: their
    old partitions and starts mean nothing for the new lineage."""
    new_lineages = list(new_lineages)
    now = time.monotonic()
    published = _published.setdefault(cluster, {})
    for topic in new_lineages:
        for key in [key for key in published if key[0] == topic]:
            del published[key]
    sets = {key: partitions for key, partitions in sets.items()
            if key not in published or published[key][0] != partitions or now - published[key][1] > REPUBLISH_SECONDS}
    if not sets and not new_lineages:
        return
    client = redis_client()
    try:
        for topic in new_lineages:
            for prefix in (KNOWN_PARTITIONS_PREFIX, GUARD_STARTS_PREFIX):
                stale = list(client.scan_iter(match=f"{prefix}:{cluster}:{topic}:*", count=500))
                if stale:
                    client.delete(*stale)
        pipe = client.pipeline(transaction=False)
        for (topic, group_id), partitions in sets.items():
            target = known_partitions_key(cluster=cluster, topic=topic, group_id=group_id)
            if not partitions:
                pipe.delete(target)
                continue
            staging = f"{target}:staging"
            pipe.delete(staging)
            pipe.sadd(staging, *sorted(partitions))
            pipe.rename(staging, target)
            pipe.expire(target, KNOWN_SET_TTL_SECONDS)
        pipe.execute()
        published.update((key, (partitions, now)) for key, partitions in sets.items())
    except redis.RedisError as error:
        # Guards fall back to their own bookkeeping; the poll itself succeeded.
        log.warning("could not publish known-partition sets for cluster %s: %s", cluster, error)


def read(*, cluster: str, topic: str, group_id: str) -> frozenset[int]:
    client = redis_client()
    members = client.smembers(known_partitions_key(cluster=cluster, topic=topic, group_id=group_id))
    return frozenset(int(member) for member in members)


def read_guard_starts(*, cluster: str, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str, int], int]:
    """(topic, group id, partition) -> reported start offset, for the given (topic, group id) pairs.

    Redis being unreachable only means no reports this poll: findings then
    keep their estimate, and the next poll tries again.
    """
    pairs = sorted(set(pairs))
    if not pairs:
        return {}
    client = redis_client()
    try:
        pipe = client.pipeline(transaction=False)
        for topic, group_id in pairs:
            pipe.hgetall(guard_starts_key(cluster=cluster, topic=topic, group_id=group_id))
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
