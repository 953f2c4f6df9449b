"""The watcher: sees partitions added within about a second, and watches a
new partition's readers until they take it (issue 11, DESIGN section 3).

Every WATCH_INTERVAL_SECONDS celery beat enqueues one tick per cluster. A
tick is one metadata request; only when a topic's partition count differs
from the stored one, or a new partition is still being picked up, does it
take a targeted snapshot of those topics and the groups that read them, which
the services write exactly like a poll.

Why beat and not a long-running loop: beat is already the single scheduler,
ticks are short and idempotent, and a tick whose worker dies is simply
followed by the next one; no task has to re-enqueue itself or hold a lease
across a worker's death. Single-flight per cluster: a tick shares the poll's
Redis lock and skips (never waits) while a poll or another tick holds it,
and ticks still queued after one interval expire.
"""

from __future__ import annotations

import time

from django.conf import settings

from groups import selectors
from groups.models import Cluster
from tasks.kafka import KafkaAdapter, KafkaUnavailable
from tasks.polling import cluster_adapter, forget_adapter, poll_cluster


def watch_cluster(*, cluster_id: int) -> dict:
    """One tick, in this order:

    1. one metadata request: the partition count of every topic;
    2. topics to observe: those whose count differs from the stored one,
       plus topics of findings still being picked up;
    3. if any: a targeted snapshot of them and the groups that read them;
    4. while a new partition is being picked up, a second targeted snapshot
       half an interval later: the pickup bracket, and so the possible range,
       is then about half a second wide instead of a whole one.
    """
    started = time.monotonic()
    cluster = Cluster.objects.get(id=cluster_id)
    adapter = cluster_adapter(cluster)
    first = _tick(cluster=cluster, adapter=adapter)
    if first.get("watched"):
        time.sleep(max(0.0, started + settings.WATCH_INTERVAL_SECONDS / 2 - time.monotonic()))
        second = _tick(cluster=cluster, adapter=adapter)
        return {**first, "second": second.get("observed", [])}
    return first


def _tick(*, cluster: Cluster, adapter: KafkaAdapter) -> dict:
    known_counts, readers, watched = selectors.cluster_watch_state(cluster_id=cluster.id)
    try:
        counts = adapter.partition_counts()
    except KafkaUnavailable as error:
        forget_adapter(cluster.id)
        return {"cluster": cluster.name, "ok": False, "error": str(error)}  # the full poll records it
    changed = {name for name, count in counts.items() if name in known_counts and known_counts[name] != count}
    topics = (changed | watched) & set(counts)
    if not topics:
        return {"cluster": cluster.name, "ok": True, "observed": []}
    groups = set().union(*(readers.get(topic, set()) for topic in topics))
    summary = poll_cluster(cluster_id=cluster.id, adapter=adapter, topics=topics, groups=groups)
    _, _, still_watched = selectors.cluster_watch_state(cluster_id=cluster.id)
    return {**summary.as_dict(), "observed": sorted(topics), "changed": sorted(changed),
            "watched": sorted(still_watched)}
