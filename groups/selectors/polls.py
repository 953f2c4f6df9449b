"""What a poll's write starts from: the stored state of a cluster that the
core (``groups.domain.detection``) compares a snapshot with, in the core's
own types. ``groups.services.polls`` reads it inside its transaction; for a
targeted snapshot only its topics and groups are read (the watcher writes
every second: it must not load the whole cluster each time)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import QuerySet

from groups.domain import detection
from groups.domain.snapshot import Snapshot
from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, PartitionGeneration, Protection, Topic


@dataclass(frozen=True)
class PollState:
    """``topics`` and ``groups``: the stored rows by name; ``known_topics`` and
    ``known_groups``: the same as the core takes them; ``open_findings``: the
    open findings, not read yet (the service locks them as it reads them)."""

    topics: dict[str, Topic]
    groups: dict[str, ConsumerGroup]
    known_topics: list[detection.KnownTopic]
    known_groups: list[detection.KnownGroup]
    open_findings: QuerySet[Finding]
    protections: dict[tuple[str, str, int], detection.Protection]


def protections_of(*, cluster: Cluster, snapshot: Snapshot) -> dict[tuple[str, str, int], detection.Protection]:
    """Gapwatch's commits as a member on the snapshot's topics, each of the
    topic's current lineage only (its Kafka topic id), by (group, topic, partition)."""
    ids = {topic.name: topic.topic_id for topic in snapshot.topics}
    rows = Protection.objects.filter(cluster=cluster, topic__in=list(ids)).values_list(
        "group_id", "topic", "kafka_topic_id", "partition", "offset", "won", "words")
    return {(group_id, topic, partition): detection.Protection(offset=offset, won=won, words=words)
            for group_id, topic, topic_id, partition, offset, won, words in rows if ids.get(topic) == topic_id}


def cluster_poll_state(*, cluster: Cluster, snapshot: Snapshot) -> PollState:
    """The stored state of ``cluster`` the core needs for ``snapshot``."""
    topic_rows, group_rows = Topic.objects.filter(cluster=cluster), ConsumerGroup.objects.filter(cluster=cluster)
    finding_rows = Finding.objects.filter(cluster=cluster, closed_at__isnull=True)
    if not snapshot.complete:
        topic_rows = topic_rows.filter(name__in=snapshot.scope)
        group_rows = group_rows.filter(group_id__in=[g.group_id for g in snapshot.groups])
        finding_rows = finding_rows.filter(topic__name__in=snapshot.scope)
    topics = {topic.name: topic for topic in topic_rows}
    latest = {
        generation.topic_id: generation
        for generation in PartitionGeneration.objects.filter(topic__in=topic_rows)
        .order_by("topic_id", "-number")
        .distinct("topic_id")
    }
    known_topics = [
        detection.KnownTopic(
            name=topic.name, topic_id=latest[topic.id].kafka_topic_id, generation=latest[topic.id].number,
            partition_ids=frozenset(latest[topic.id].partitions), deleted=topic.deleted,
            floors={int(p): offset for p, offset in (topic.partition_floors or {}).items()},
            floors_at=topic.partition_floors_at,
        )
        for topic in topics.values()
        if topic.id in latest
    ]
    groups = {group.group_id: group for group in group_rows}
    consumed: dict[str, set[str]] = defaultdict(set)
    for group_id, topic_name in GroupTopic.objects.filter(group__in=group_rows).values_list(
        "group__group_id", "topic__name"
    ):
        consumed[group_id].add(topic_name)
    known_groups = [
        detection.KnownGroup(group_id=g.group_id, consumed_topics=frozenset(consumed[g.group_id]),
                             declared_policy=g.declared_policy, declared_isolation=g.declared_isolation,
                             evidenced_policy=g.evidenced_policy, policy_evidence=g.policy_evidence,
                             first_seen_at=g.first_seen_at)
        for g in groups.values()
    ]
    return PollState(topics=topics, groups=groups, known_topics=known_topics, known_groups=known_groups,
                     open_findings=finding_rows.select_related("group", "topic", "generation"),
                     protections=protections_of(cluster=cluster, snapshot=snapshot))


def findings_partitions(*, cluster: Cluster, snapshot: Snapshot) -> dict[tuple[str, str], set[int]]:
    """(topic, group id) -> partitions that ever became a finding (open or closed)."""
    partitions: dict[tuple[str, str], set[int]] = defaultdict(set)
    rows = Finding.objects.filter(cluster=cluster)
    if not snapshot.complete:
        rows = rows.filter(topic__name__in=snapshot.scope)
    for topic, group_id, partition in rows.values_list(
        "topic__name", "group__group_id", "partition"
    ).distinct():
        partitions[(topic, group_id)].add(partition)
    return partitions


def finding_key(row: Finding) -> detection.FindingKey:
    return detection.FindingKey(row.group.group_id, row.topic.name, row.partition, row.generation.number)


def finding_state(*, row: Finding, guard_starts: dict[tuple[str, str, int], int]) -> detection.FindingState:
    """An open finding as the core takes it; ``guard_starts`` (topic, group id,
    partition -> offset) fill a guard start the row does not have yet."""
    key = finding_key(row)
    guard_start = row.guard_start_offset
    if guard_start is None:
        guard_start = guard_starts.get((key.topic, key.group_id, key.partition))
    return detection.FindingState(
        key=key, created_at=row.created_at, first_log_start=row.first_log_start,
        pre_pickup_high_watermark=row.pre_pickup_high_watermark, first_commit=row.first_commit,
        pre_pickup_stable_offset=row.pre_pickup_stable_offset,
        polls_without_owner=row.polls_without_owner, state=row.state, guard_start_offset=guard_start,
        pickup_after=row.pickup_after, pickup_before=row.pickup_before, likely_start=row.likely_start,
        likely_start_evidence=row.likely_start_evidence, first_sight=row.generation.is_new_lineage,
    )
