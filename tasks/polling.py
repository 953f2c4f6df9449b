"""One poll of one cluster: observe with the adapter, let the services
write, then run the poll's follow-ups. Used by the Celery task and by
`manage.py poll_now`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from groups.domain.record_counts import CountedRange
from groups.selectors.finding import findings_to_count
from groups.selectors.clusters import cluster_find
from groups.selectors.watcher import ObservationInputs, java_group_ids, observation_inputs
from groups.domain.detection import FindingKey, LikelyStart
from groups.domain.snapshot import Snapshot
from groups.models import Cluster
from groups.services.clusters import cluster_record_features
from groups.services.polls import (
    PollSummary,
    cluster_record_failure,
    finding_record_count_write,
    poll_record_success,
)
from groups.services.resets import reset_auto_repair
from groups.services.standing_rules import standing_rules_apply
from adapters.kafka import KafkaAdapter, KafkaUnavailable
from tasks.cluster_client import kafka_client
from tasks.poll_parts import CeleryParts, split_parts

log = logging.getLogger(__name__)


# One adapter per cluster and settings in each worker process: the watcher ticks
# every second, and a new admin client would connect and bootstrap every time.
# A dropped one is closed once nobody holds it: a threads-pool worker shares it
# among its threads, and closing it under one aborts that thread's requests.
# One nobody used for KAFKA_CLIENT_IDLE_SECONDS (a deleted or disabled
# cluster's) is dropped at the next use of any.
@dataclass
class _Kept:
    adapter: KafkaAdapter
    holders: int = 0
    dropped: bool = False
    used_at: float = field(default_factory=time.monotonic)


_ADAPTERS: dict[tuple, _Kept] = {}
_ADAPTERS_LOCK = threading.Lock()


@contextmanager
def cluster_adapter(cluster: Cluster) -> Iterator[KafkaAdapter]:
    """The worker's client of ``cluster``, held for the ``with`` block."""
    config = cluster.cluster_config()
    key = (cluster.id, config, settings.KAFKA_TIMEOUT_SECONDS, settings.KAFKA_MAX_IN_FLIGHT)
    with _ADAPTERS_LOCK:
        unused_since = time.monotonic() - settings.KAFKA_CLIENT_IDLE_SECONDS
        idle = _drop(lambda _, other: not other.holders and other.used_at < unused_since)
        kept = _ADAPTERS.get(key)
        if kept is None:
            idle += _drop(lambda other, _: other[0] == cluster.id)  # the cluster's settings changed
            kept = _ADAPTERS[key] = _Kept(kafka_client(config))
        kept.holders += 1
    _close(idle)
    try:
        yield kept.adapter
    finally:
        with _ADAPTERS_LOCK:
            kept.holders -= 1
            kept.used_at = time.monotonic()
            idle = [kept] if kept.dropped and not kept.holders else []
        _close(idle)


def forget_adapter(cluster_id: int | None = None) -> None:
    """Drop the cluster's cached client (every cluster's: None) after a failed
    request. librdkafka's admin client does not always recover from a
    whole-cluster outage (after a restart, DescribeConsumerGroups kept timing
    out on the old client for minutes, while a new client answered at once),
    so the next observation starts with a new one. The dropped client is
    closed when its last holder lets go: Kafka's Java client keeps its network
    thread, retrying its connections, until it is closed, so a client only
    dropped outlived every observation of an outage."""
    with _ADAPTERS_LOCK:
        idle = _drop(lambda key, _: cluster_id is None or key[0] == cluster_id)
    _close(idle)


def _drop(match: Callable[[tuple, _Kept], bool]) -> list[_Kept]:
    """Under the lock: remove the clients ``match(key, kept)`` picks; returns
    those nobody holds (to close now; a held one is closed by its last holder)."""
    idle = []
    for key in [key for key, kept in _ADAPTERS.items() if match(key, kept)]:
        kept = _ADAPTERS.pop(key)
        kept.dropped = True
        if not kept.holders:
            idle.append(kept)
    return idle


def _close(idle: list[_Kept]) -> None:
    for kept in idle:
        kept.adapter.close()


def poll_cluster(
    *, cluster_id: int, adapter: KafkaAdapter | None = None, topics: Collection[str] | None = None,
    groups: Collection[str] | None = None, every_share_and_streams_group: bool = False,
    inputs: ObservationInputs | None = None,
) -> PollSummary:
    """A full poll, or (``topics``) the watcher's targeted one, of ``groups``
    or (None) of every group the cluster lists. ``groups`` names classic and
    consumer groups, and share and streams groups stored as such, unless
    ``every_share_and_streams_group``: then every one the cluster lists.

    1. Resolve likely starts that are due (time index, see ``likely_starts``).
    2. Snapshot: log starts only of topics with open findings or a changed
       partition count, and of partitions a group reads without a commit.
    3. Write, then the follow-ups. A failed full poll marks the cluster
       unreachable; a failed targeted one is only reported (the next full
       poll decides about the cluster).

    Stored state is read once (``observation_inputs``), or handed down by
    the watcher's tick that read it (``inputs``).
    """
    inputs = inputs or observation_inputs(cluster_id=cluster_id, likely_due_before=likely_due_before())
    cluster, known_counts = inputs.cluster, inputs.known_counts
    if adapter is None:
        with cluster_adapter(cluster) as held:
            return poll_cluster(cluster_id=cluster_id, adapter=held, topics=topics, groups=groups,
                                every_share_and_streams_group=every_share_and_streams_group, inputs=inputs)
    started = time.monotonic()
    # Share and streams groups: every one the cluster lists on a full read of
    # the groups, the stored ones among the named readers otherwise; none
    # when switched off.
    shares = streams = None
    if not settings.JAVA_ADMIN_CLIENT:
        shares = streams = ()
    elif groups is not None:
        by_type = java_group_ids(cluster_id=cluster.id, among=groups)
        groups = set(groups) - by_type["share"] - by_type["streams"]
        if not every_share_and_streams_group:
            shares, streams = by_type["share"], by_type["streams"]
    # A big cluster's full poll is read in parts by several workers (tasks.poll_parts).
    part_count = split_parts(sum(known_counts.values())) if topics is None and groups is None else 1
    parts = CeleryParts(cluster_id=cluster.id, adapter=adapter) if part_count > 1 else None
    try:
        likely = likely_starts(due=inputs.likely_due, adapter=adapter)
        snapshot = adapter.snapshot(
            cluster=cluster.name, now=timezone.now(), log_starts_for=inputs.open_topics | inputs.watched,
            known_counts=known_counts, topics=topics, groups=groups, share_groups=shares, streams_groups=streams,
            java=settings.JAVA_ADMIN_CLIENT, parts=parts, part_count=part_count,
            every_share_and_streams_group=every_share_and_streams_group,
            stable_everywhere=inputs.floors_due and topics is None and groups is None,
        )
    except KafkaUnavailable as error:
        forget_adapter(cluster.id)
        if topics is not None:
            return PollSummary(cluster=cluster.name, ok=False, error=str(error),
                               kafka_seconds=time.monotonic() - started)
        return cluster_record_failure(
            cluster_id=cluster.id, error=str(error), now=timezone.now(), kafka_seconds=time.monotonic() - started
        )
    summary = poll_record_success(
        cluster_id=cluster.id, snapshot=snapshot, now=snapshot.taken_at, kafka_seconds=time.monotonic() - started,
        likely_starts=likely,
    )
    if topics is None and groups is None and settings.JAVA_ADMIN_CLIENT:
        record_features(cluster_id=cluster.id, adapter=adapter)
    if parts is not None:
        summary = replace(summary, parts={"count": part_count, "read_elsewhere": parts.answered_elsewhere,
                                          "read_here": parts.read_here, "retaken": parts.retaken})
    poll_follow_up(cluster_id=cluster.id, summary=summary, snapshot=snapshot)
    return summary


def record_features(*, cluster_id: int, adapter: KafkaAdapter) -> None:
    """After a full poll: what the cluster's release serves (one
    DescribeFeatures request). A cluster that does not answer keeps what was
    stored; the poll stands either way."""
    try:
        metadata_version, levels = adapter.finalized_features()
    except KafkaUnavailable as error:
        log.warning("features of cluster %s not read: %s", cluster_id, error)
        return
    cluster_record_features(cluster_id=cluster_id, metadata_version=metadata_version, levels=levels)


def likely_due_before():
    """Findings taken before this moment are due for their likely start (PICKUP_GRACE_MS ago)."""
    return timezone.now() - timedelta(milliseconds=settings.PICKUP_GRACE_MS)


def likely_starts(*, due: list[dict], adapter: KafkaAdapter) -> dict[FindingKey, LikelyStart]:
    """An estimate, never a bound: for findings taken at least PICKUP_GRACE_MS
    ago (``due``: ``ObservationInputs.likely_due``), the first offset appended at or after ``pickup_before`` + grace, from
    Kafka's time index, where a latest member that fetched its start position
    by then started. Producer clocks (CreateTime) and slow members move it; the
    core keeps it inside [H_k, C_f]. Kafka answers "none that recent" (-1):
    then the log end now, read after that instant."""
    grace = timedelta(milliseconds=settings.PICKUP_GRACE_MS)
    ends: dict[FindingKey, LikelyStart] = {}
    types: dict[str, str] = {}
    for row in due:
        topic, partition = row["topic__name"], row["partition"]
        at_ms = int((row["pickup_before"] + grace).timestamp() * 1000)
        try:
            if topic not in types:
                types[topic] = adapter.topic_timestamp_type(topic)
            offset = adapter.offsets_for_times(topic=topic, partitions=[partition], timestamp_ms=at_ms)[partition]
            evidence = f"time index ({types[topic]})"
            if offset is None:
                offset = adapter.partition_offsets(topic=topic, partitions=[partition])[partition].high_watermark
                evidence = f"log end after the pickup ({types[topic]} time index had no later message)"
        except KafkaUnavailable as error:
            # Only the estimate waits, until the next observation tries again.
            log.warning("likely start of %s [%s] not resolved yet: %s", topic, partition, error)
            continue
        key = FindingKey(row["group__group_id"], topic, partition, row["generation__number"])
        ends[key] = LikelyStart(offset=offset, evidence=evidence)
    return ends


def poll_follow_up(*, cluster_id: int, summary: PollSummary, snapshot: Snapshot) -> None:
    """What a committed poll starts, in this order:

    1. auto-repair: opt-in groups that are Empty in this snapshot get their new
       partitions reset at once (before their consumers return);
    2. standing rules: decided findings a rule covers get its backfill queued
       (the watcher's polls too, so a repair starts within a second of the bound).

    (Webhooks went out when the poll's write committed: services/notifications.)
    Neither can undo the poll: a failure here is logged and the poll stands.
    """
    if summary.new_finding_ids:
        try:
            reset_auto_repair(finding_ids=summary.new_finding_ids, snapshot=snapshot)
        except Exception:
            log.exception("auto-repair after the poll of %s failed", summary.cluster)
    if summary.ok:
        try:
            standing_rules_apply(cluster_id=cluster_id)
        except Exception:
            log.exception("standing rules after the poll of %s failed", summary.cluster)


def count_missed_records(*, cluster_id: int, seconds: float) -> int:
    """Count the records of the ranges of open findings that have no count
    of themselves yet (``findings_to_count``), for at most ``seconds``;
    returns how many were stored. A cluster gone or not answering counts
    nothing now: the next poll asks again."""
    cluster = cluster_find(cluster_id=cluster_id)
    if cluster is None:
        return 0
    deadline, stored = time.monotonic() + seconds, 0
    with cluster_adapter(cluster) as adapter:
        for row in findings_to_count(cluster_id=cluster_id):
            if time.monotonic() > deadline:
                break
            try:
                read = adapter.count_records(topic=row.topic.name, partition=row.partition, start=row.backfill_start,
                                             end=row.backfill_end, deadline=deadline)
            except KafkaUnavailable as error:
                log.warning("the records of finding %s are left for the next poll's count: %s", row.id, error)
                break
            stored += finding_record_count_write(finding_id=row.id, counted=CountedRange(
                read.start, read.end, read.read_committed, read.read_uncommitted))
        return stored
