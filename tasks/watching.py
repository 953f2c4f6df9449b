"""The watcher: sees partitions added within about a second, and watches a
new partition's readers until they take it (issue 11, DESIGN section 3).

Every WATCH_INTERVAL_SECONDS celery beat enqueues one tick per cluster. A
tick is one metadata request; only when a topic's partition count differs
from the stored one, a topic is not stored yet, or a new partition is still
being picked up, does it
take a targeted snapshot of those topics and the groups that read them, which
the services write exactly like a poll.

Why beat and not a long-running loop: beat is already the single scheduler,
ticks are short and idempotent, and a tick whose worker dies is simply
followed by the next one; no task has to re-enqueue itself or hold a lease
across a worker's death. Single-flight per cluster: a tick shares the poll's
Redis lock and waits at most a quarter of an interval for it (then skips)
while a poll or another tick holds it, and ticks still queued after one
interval expire.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from groups.selectors.watcher import ObservationInputs, observation_inputs, topic_readers, watched_topics
from adapters.kafka import KafkaAdapter, KafkaUnavailable
from tasks.polling import cluster_adapter, forget_adapter, likely_due_before, poll_cluster

log = logging.getLogger(__name__)


def observation_step() -> float:
    """Seconds between a watched pickup's observations within one tick."""
    return settings.WATCH_INTERVAL_SECONDS / settings.WATCH_OBSERVATIONS_PER_TICK


def watch_cluster(*, cluster_id: int, started: float | None = None) -> dict:
    """One tick, in this order:

    1. one metadata request: the partition count of every topic;
    2. topics to observe: those whose count differs from the stored one,
       those no poll stored yet (recorded now, so a raise seconds later is a
       change), plus topics of findings still being picked up;
    3. if any: a targeted snapshot of them and the groups that read them;
       when a count changed, of every listed group that reads them (see ``_tick``);
    4. while a new partition is being picked up, further targeted snapshots
       at every 1/WATCH_OBSERVATIONS_PER_TICK of the interval (never past
       it, so the next tick is not skipped): the pickup bracket, and so the
       possible range, is then about a quarter of a second wide instead of a
       whole one.

    ``started`` (``time.monotonic()``) is when the tick arrived; observation
    slots are counted from it.
    """
    started = time.monotonic() if started is None else started
    inputs = observation_inputs(cluster_id=cluster_id, likely_due_before=likely_due_before())
    with cluster_adapter(inputs.cluster) as adapter:  # held through the tick's sub-slots
        begun = time.monotonic()
        first = _tick(cluster_id=cluster_id, adapter=adapter, inputs=inputs)
        took = time.monotonic() - begun
        step = observation_step()
        later, watched = [], first.get("watched")
        while watched:
            # The next slot still ahead (an observation that ran long skips the
            # slots it overran), and only if an observation as long as the last
            # one ends before the interval does: the next tick waits at most a
            # step for the lock, then skips and leaves a whole interval unobserved.
            slot = started + step * (int((time.monotonic() - started) / step) + 1)
            if slot + took >= started + settings.WATCH_INTERVAL_SECONDS:
                break
            # Short: up to the next sub-slot (observation_step), inside this tick's own interval on the watch queue.
            time.sleep(max(0.0, slot - time.monotonic()))
            observation = _tick(cluster_id=cluster_id, adapter=adapter)
            took = time.monotonic() - slot
            later.append(observation.get("observed", []))
            watched = observation.get("watched")
        return {**first, "later": later} if later else first


def _tick(*, cluster_id: int, adapter: KafkaAdapter, inputs: ObservationInputs | None = None) -> dict:
    """One observation: stored state read once (``inputs``, or now) and
    handed to the poll it starts, one metadata request, and after a write
    the topics still watched."""
    inputs = inputs or observation_inputs(cluster_id=cluster_id, likely_due_before=likely_due_before())
    cluster, known_counts, watched = inputs.cluster, inputs.known_counts, inputs.watched
    try:
        counts = adapter.partition_counts(java=settings.JAVA_ADMIN_CLIENT)
    except KafkaUnavailable as error:
        forget_adapter(cluster.id)
        return {"cluster": cluster.name, "ok": False, "error": str(error)}  # the full poll records it
    changed = {name for name, count in counts.items() if name in known_counts and known_counts[name] != count}
    # A topic no poll stored yet is recorded now, with its partition count: raised seconds
    # after it was created (provisioning scripts, Terraform), it is then a change like any
    # other (issue 41: stored first by a full poll with its raised count, it was no change
    # at all). A cluster never polled is left to its first full poll.
    new = {name for name in counts if name not in known_counts} if cluster.last_success_at is not None else set()
    changed |= new
    topics = (changed | watched) & set(counts)
    if not topics:
        return {"cluster": cluster.name, "ok": True, "observed": []}
    # New partitions: every listed group that reads the topics (asked in the JVM), not only the stored
    # readers: a group that took a topic up since the last full poll read it before the change, and
    # only this snapshot can show it (reading fewer was a silent miss). Without the JVM: every group.
    every_java = False
    if changed:
        try:
            listed = adapter.topic_readers({name: counts[name] for name in topics},
                                           java=settings.JAVA_ADMIN_CLIENT)
        except KafkaUnavailable as error:
            log.warning("readers of %s not asked in the JVM, every group is read: %s", sorted(topics), error)
            listed = None
        stored = topic_readers(cluster_id=cluster.id, topics=topics)
        groups, every_java = (None, False) if listed is None else (listed | set(stored), True)
    else:
        groups = topic_readers(cluster_id=cluster.id, topics=topics)
    summary = poll_cluster(cluster_id=cluster.id, adapter=adapter, topics=topics, groups=groups,
                           every_share_and_streams_group=every_java, inputs=inputs)
    still_watched = watched_topics(cluster_id=cluster.id)
    return {**summary.as_dict(), "observed": sorted(topics), "changed": sorted(changed - new),
            "new": sorted(new), "watched": sorted(still_watched)}
