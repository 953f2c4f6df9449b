"""Writes. One poll's changes are written here, in one transaction, in bulk.

The poller observes (``adapters.kafka.adapter``), the core decides
(``groups.domain.detection``) from the stored state
(``groups.selectors.polls``), and these functions write — in that order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from groups.domain import detection
from groups.domain.group_kinds import group_kind
from groups.domain.kafka_features import share_groups_on_release
from groups.domain.known_partitions import known_partition_sets
from groups.domain.reasons import system_text
from groups.domain.record_counts import CountedRange
from groups.selectors.polls import cluster_poll_state, finding_key, finding_state, findings_partitions
from groups.services import known_partitions
from groups.services.lifecycle import findings_expire, findings_lock
from groups.services.notifications import notifications_create
from groups.models import (
    AuditEvent,
    Cluster,
    ConsumerGroup,
    Finding,
    GroupTopic,
    LagSample,
    Notification,
    PartitionGeneration,
    Topic,
)
from groups.domain.snapshot import GroupSnapshot, Snapshot, TopicSnapshot

log = logging.getLogger(__name__)

# Transitions worth telling a person about (old state None = just created).
NOTIFY_STATES = {Finding.State.GAP, Finding.State.UNOWNED}

# What every poll copies from the core's accounting onto a finding's row: all
# of it but the key and what the row got when it was created (first_sight is
# the generation's is_new_lineage).
ACCOUNTED_FIELDS = tuple(
    field.name for field in fields(detection.FindingAccounting)
    if field.name not in ("key", "created_at", "first_log_start", "first_sight")
)
# Columns that cannot hold None: the core's None (no owner, no policy yet) is stored as "" (all are text).
_NOT_NULL = frozenset(name for name in ACCOUNTED_FIELDS if not Finding._meta.get_field(name).null)


@dataclass(frozen=True)
class PollSummary:
    cluster: str
    ok: bool
    error: str = ""
    kafka_seconds: float = 0.0
    write_seconds: float = 0.0
    topics: int = 0
    partitions: int = 0
    groups: int = 0
    new_generations: int = 0
    open_findings: int = 0
    new_findings: list[dict] = field(default_factory=list)
    transitions: int = 0
    groups_to_watch: list[str] = field(default_factory=list)
    # For the poll's follow-ups once it committed (tasks.polling): auto-repair and webhooks.
    new_finding_ids: list[int] = field(default_factory=list)
    notification_ids: list[int] = field(default_factory=list)
    # A split poll (tasks.poll_parts): its parts, and how many other workers read.
    parts: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "cluster": self.cluster, "ok": self.ok, "error": self.error,
            "duration_seconds": round(self.kafka_seconds + self.write_seconds, 4),
            "kafka_seconds": round(self.kafka_seconds, 4), "write_seconds": round(self.write_seconds, 4),
            "topics": self.topics, "partitions": self.partitions, "groups": self.groups,
            "new_generations": self.new_generations, "open_findings": self.open_findings,
            "transitions": self.transitions, "groups_to_watch": self.groups_to_watch,
            "new_findings": self.new_findings, "parts": self.parts,
        }


def group_topic_partitions(*, group: GroupSnapshot, topic: TopicSnapshot) -> list[dict]:
    """Every partition of ``topic`` as ``group`` stands on it (``GroupTopic.partitions``):
    offsets, ``detection.partition_lag`` and the member that owns it."""
    owners = {partition: member for member in group.members for name, partition in member.assignment
              if name == topic.name}
    rows = []
    for offsets in topic.partitions:
        committed = group.committed.get((topic.name, offsets.partition))
        owner = owners.get(offsets.partition)
        rows.append({
            "partition": offsets.partition, "log_start": offsets.log_start, "committed": committed,
            "high_watermark": offsets.high_watermark,
            "lag": detection.partition_lag(high_watermark=offsets.high_watermark, log_start=offsets.log_start,
                                           committed=committed),
            "client_id": owner.client_id if owner else "", "host": owner.host if owner else "",
        })
    return rows


def cluster_record_skipped_poll(*, cluster_id: int) -> None:
    """A poll that was due did not run: the last one still held the cluster's lock."""
    Cluster.objects.filter(id=cluster_id).update(skipped_polls_total=F("skipped_polls_total") + 1)


def cluster_record_failure(*, cluster_id: int, error: str, now: datetime, kafka_seconds: float) -> PollSummary:
    """A failed or partial poll changes nothing but the cluster's status and error."""
    Cluster.objects.filter(id=cluster_id).update(
        status=Cluster.Status.UNREACHABLE, last_error=system_text(error), last_poll_at=now,
        last_poll_duration_ms=int(kafka_seconds * 1000),
        polls_total=F("polls_total") + 1, poll_failures_total=F("poll_failures_total") + 1,
    )
    name = Cluster.objects.values_list("name", flat=True).get(id=cluster_id)
    return PollSummary(cluster=name, ok=False, error=error, kafka_seconds=kafka_seconds)


def _apply_accounting(row: Finding, accounting: detection.FindingAccounting, now: datetime) -> None:
    for name in ACCOUNTED_FIELDS:
        value = getattr(accounting, name)
        setattr(row, name, "" if value is None and name in _NOT_NULL else value)
    row.updated_at = now


def poll_record_success(
    *, cluster_id: int, snapshot: Snapshot, now: datetime, kafka_seconds: float,
    likely_starts: dict[detection.FindingKey, detection.LikelyStart] | None = None,
) -> PollSummary:
    """Write one poll: complete, or the watcher's targeted snapshot (``snapshot.scope``).

    1. Lock the cluster row (two polls of one cluster never interleave writes)
       and load what is stored.
    2. Ask the core what the snapshot changes.
    3. Upsert topics, generations, groups and group-topic lag; write lag
       samples; create, update and close findings; audit every state change
       and queue notifications (sent once it commits) — all in bulk, in this one transaction.
    4. After commit: publish the known-partition sets for consumer-side guards.
       The caller runs the rest (auto-repair of the new findings, standing
       rules) from the summary's ``new_finding_ids``.
    """
    started = time.monotonic()
    with transaction.atomic():
        # NO KEY UPDATE: polls of one cluster exclude each other, while rows
        # that merely refer to the cluster (audit, jobs) can still be written.
        cluster = Cluster.objects.select_for_update(no_key=True).get(id=cluster_id)
        # A share group's start rule as the cluster's release applies it (KAFKA-20742 from Kafka 4.4).
        snapshot = share_groups_on_release(snapshot=snapshot,
                                           metadata_version=(cluster.kafka_features or {}).get("metadata_version", ""))
        stored = cluster_poll_state(cluster=cluster, snapshot=snapshot)
        # Locked like every lifecycle action locks them: a finding a job repairs or
        # a person dismisses meanwhile is written after this poll, never under it.
        open_rows = findings_lock(stored.open_findings)
        guard_starts = known_partitions.read_guard_starts(
            cluster=cluster.name,
            pairs=[(row.topic.name, row.group.group_id) for row in open_rows if row.guard_start_offset is None],
        )
        changes = detection.evaluate_snapshot(
            snapshot=snapshot, known_topics=stored.known_topics, known_groups=stored.known_groups,
            open_findings=[finding_state(row=row, guard_starts=guard_starts) for row in open_rows], now=now,
            unowned_after_polls=settings.UNOWNED_AFTER_POLLS, likely_starts=likely_starts,
            watching=cluster.last_success_at is not None, protections=stored.protections,
        )
        topics = _write_topics(cluster=cluster, snapshot=snapshot, stored=stored.topics, changes=changes, now=now)
        generations = _write_generations(topics=topics, changes=changes, now=now)
        groups = _write_groups(cluster=cluster, snapshot=snapshot, stored=stored.groups, now=now)
        _write_policy_evidence(cluster=cluster, groups=groups, changes=changes, now=now)
        _write_group_topics(snapshot=snapshot, topics=topics, groups=groups, now=now)
        findings = _write_findings(
            cluster=cluster, changes=changes, open_rows=open_rows, topics=topics, groups=groups,
            generations=generations, now=now,
        )
        notifications = _write_audit_and_notifications(cluster=cluster, changes=changes, findings=findings,
                                                       groups=snapshot.groups)
        new_finding_ids = [findings[key].id for key in changes.new_findings]
        duration = kafka_seconds + time.monotonic() - started
        slow = snapshot.complete and duration > settings.POLL_INTERVAL_SECONDS
        Cluster.objects.filter(id=cluster.id).update(
            status=Cluster.Status.OK, last_error="", last_poll_at=now, last_success_at=now,
            last_poll_duration_ms=int(duration * 1000),
            polls_total=F("polls_total") + (1 if snapshot.complete else 0),
            slow_polls_total=F("slow_polls_total") + (1 if slow else 0),
        )
        if slow:
            log.warning("the full poll of cluster %s took %.1fs, longer than POLL_INTERVAL_SECONDS (%ss)",
                        cluster.name, duration, settings.POLL_INTERVAL_SECONDS)
        sets = known_partition_sets(
            snapshot=snapshot, finding_partitions=findings_partitions(cluster=cluster, snapshot=snapshot),
            consumed_before={group.group_id: group.consumed_topics for group in stored.known_groups},
        )
        recreated = [g.topic for g in changes.new_generations if g.is_new_lineage and g.topic in stored.topics]
        transaction.on_commit(
            lambda: known_partitions.publish(cluster=cluster.name, sets=sets, new_lineages=recreated)
        )
    write_seconds = time.monotonic() - started
    new_keys = set(changes.new_findings)
    return PollSummary(
        cluster=cluster.name, ok=True, kafka_seconds=kafka_seconds, write_seconds=write_seconds,
        topics=len(snapshot.topics), partitions=sum(len(t.partitions) for t in snapshot.topics),
        groups=len(snapshot.groups), new_generations=len(changes.new_generations),
        open_findings=len(changes.accounting), transitions=len(changes.transitions),
        groups_to_watch=sorted(changes.groups_to_watch),
        new_findings=[
            {"group": a.key.group_id, "topic": a.key.topic, "partition": a.key.partition,
             "generation": a.key.generation, "state": a.state, "lag": a.lag}
            for a in changes.accounting if a.key in new_keys
        ],
        new_finding_ids=new_finding_ids, notification_ids=[n.id for n in notifications],
    )


def _write_topics(*, cluster: Cluster, snapshot: Snapshot, stored: dict, changes: detection.Changes, now: datetime) -> dict:
    """Only new and changed topics are written (at 60k partitions, rewriting
    every row every poll was most of the poll's database time): a topic's
    ``updated_at`` is when it last changed. A topic whose end-offsets sample
    is due (one every LAG_SAMPLE_INTERVAL_SECONDS) is written too, its last sample kept as the
    previous one: the produce rate an expansion's plan reads."""
    sample_due = now - timedelta(seconds=settings.LAG_SAMPLE_INTERVAL_SECONDS)
    rows = []
    for t in snapshot.topics:
        row = stored.get(t.name)
        due = row is None or row.end_offsets_at is None or row.end_offsets_at <= sample_due
        floors = _floors_due(row=row, topic=t, snapshot=snapshot, sample_due=sample_due)
        if row is not None and not due and not floors and not _topic_changed(row, t):
            continue
        topic = Topic(
            cluster=cluster, name=t.name, kafka_topic_id=t.topic_id, is_internal=t.is_internal,
            partition_count=len(t.partitions), deleted=False,
            first_seen_at=row.first_seen_at if row is not None else now,
            updated_at=now if row is None or _topic_changed(row, t) else row.updated_at,
        )
        if due:
            topic.end_offsets, topic.end_offsets_at = sum(p.high_watermark for p in t.partitions), now
            if row is not None:
                topic.previous_end_offsets, topic.previous_end_offsets_at = row.end_offsets, row.end_offsets_at
        else:
            for name in _END_OFFSETS_FIELDS:
                setattr(topic, name, getattr(row, name))
        if floors:
            topic.partition_floors = {str(p.partition): p.last_stable_offset for p in t.partitions}
            topic.partition_floors_at = now
        elif row is not None:
            topic.partition_floors, topic.partition_floors_at = row.partition_floors, row.partition_floors_at
        rows.append(topic)
    Topic.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["cluster", "name"],
        update_fields=["kafka_topic_id", "is_internal", "partition_count", "deleted", "updated_at",
                       *_END_OFFSETS_FIELDS, "partition_floors", "partition_floors_at"],
    )
    topics = {**stored, **{row.name: row for row in rows}}  # the upsert sets each row's id
    deleted = [name for name in changes.deleted_topics if name in topics and not topics[name].deleted]
    if deleted:
        Topic.objects.filter(cluster=cluster, name__in=deleted).update(deleted=True, updated_at=now)
        for name in deleted:
            topics[name].deleted, topics[name].updated_at = True, now
    return topics


_END_OFFSETS_FIELDS = ("end_offsets", "end_offsets_at", "previous_end_offsets", "previous_end_offsets_at")


def _floors_due(*, row: Topic | None, topic: TopicSnapshot, snapshot: Snapshot, sample_due: datetime) -> bool:
    """The topic's floors are written from a complete snapshot that read
    every partition's last stable offset (before it listed the groups), at
    most every LAG_SAMPLE_INTERVAL_SECONDS: older floors still bound, only
    less tightly."""
    stale = row is None or row.partition_floors_at is None or row.partition_floors_at <= sample_due
    return (stale and snapshot.complete and bool(topic.partitions)
            and all(p.last_stable_offset is not None for p in topic.partitions))


def _topic_changed(row: Topic, topic: TopicSnapshot) -> bool:
    return (row.kafka_topic_id, row.is_internal, row.partition_count, row.deleted) != (
        topic.topic_id, topic.is_internal, len(topic.partitions), False)


def _write_generations(*, topics: dict, changes: detection.Changes, now: datetime) -> dict:
    created = PartitionGeneration.objects.bulk_create(
        PartitionGeneration(
            topic=topics[g.topic], number=g.generation, kafka_topic_id=g.topic_id,
            partitions=sorted(g.partition_ids), added_partitions=sorted(g.added_partitions),
            removed_partitions=sorted(g.removed_partitions), is_new_lineage=g.is_new_lineage, observed_at=now,
        )
        for g in changes.new_generations
    )
    return {(gen.topic.name, gen.number): gen for gen in created}


def _write_groups(*, cluster: Cluster, snapshot: Snapshot, stored: dict, now: datetime) -> dict:
    """New and changed groups are written whole; the others only get
    ``last_seen_at``, in one statement."""
    rows, seen = [], []
    for g in snapshot.groups:
        row = ConsumerGroup(
            cluster=cluster, group_id=g.group_id, state=g.state, type=g.type, assignor=g.assignor,
            member_count=len(g.members), present=True, members=_members_json(g), reset_setting=g.reset_setting[:200],
            first_seen_at=stored[g.group_id].first_seen_at if g.group_id in stored else now, last_seen_at=now,
        )
        if g.group_id in stored and not _group_changed(stored[g.group_id], row):
            seen.append(stored[g.group_id])
        else:
            rows.append(row)
    ConsumerGroup.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["cluster", "group_id"],
        update_fields=["state", "type", "assignor", "member_count", "members", "present", "last_seen_at",
                       "reset_setting"],
    )
    ConsumerGroup.objects.filter(id__in=[row.id for row in seen]).update(last_seen_at=now)
    for row in seen:
        row.last_seen_at = now
    listed = {g.group_id for g in snapshot.groups}
    if snapshot.complete:  # a targeted snapshot lists only the groups reading its topics
        ConsumerGroup.objects.filter(cluster=cluster, present=True).exclude(group_id__in=listed).update(
            present=False, state="", member_count=0, members=[]
        )
    return {row.group_id: row for row in [*seen, *rows]}  # the upsert sets each row's id


_GROUP_FIELDS = ("state", "type", "assignor", "member_count", "members", "present", "reset_setting")


def _group_changed(row: ConsumerGroup, new: ConsumerGroup) -> bool:
    return any(getattr(row, name) != getattr(new, name) for name in _GROUP_FIELDS)


def _members_json(group: GroupSnapshot) -> list[dict]:
    return [
        {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
         "assignment": [list(pair) for pair in sorted(m.assignment)]}
        for m in sorted(group.members, key=lambda m: m.member_id)
    ]


def _write_policy_evidence(*, cluster: Cluster, groups: dict, changes: detection.Changes, now: datetime) -> None:
    """What the groups' own starts proved of their policies: stored on the
    group (the next polls' rules) and audited, one row per group that changed."""
    for proof in changes.policy_evidence:
        row = groups[proof.group_id]
        previous = row.evidenced_policy
        ConsumerGroup.objects.filter(id=row.id).update(
            evidenced_policy=proof.policy, policy_evidence=proof.words, policy_evidenced_at=now)
        row.evidenced_policy, row.policy_evidence, row.policy_evidenced_at = proof.policy, proof.words, now
        AuditEvent.objects.create(
            system=True, cluster=cluster, action="group.policy_evidenced", object_type="group",
            object_id=str(row.id), detail={"group": proof.group_id, "from": previous, "to": proof.policy,
                                           "evidence": proof.words},
        )


def _write_group_topics(*, snapshot: Snapshot, topics: dict, groups: dict, now: datetime) -> None:
    """Rows whose lag or partitions changed are written whole; the others get
    ``updated_at`` (and ``last_sample_at`` when a lag sample is due) in one
    statement each."""
    by_name = {t.name: t for t in snapshot.topics}
    stored = {
        (gt.group_id, gt.topic_id): gt
        for gt in GroupTopic.objects.filter(group__in=groups.values()).only(
            "id", "group_id", "topic_id", "first_seen_at", "last_sample_at", "lag", "partitions")
    }
    sample_due = now - timedelta(seconds=settings.LAG_SAMPLE_INTERVAL_SECONDS)
    rows, samples, unchanged, sampled = [], [], [], []
    for group in snapshot.groups:
        for name in sorted(group.topics()):
            if name not in by_name:
                continue
            group_row, topic_row = groups[group.group_id], topics[name]
            previous = stored.get((group_row.id, topic_row.id))
            partitions = group_topic_partitions(group=group, topic=by_name[name])
            lag = sum(row["lag"] for row in partitions)
            due = previous is None or previous.last_sample_at is None or previous.last_sample_at <= sample_due
            if due:
                samples.append(LagSample(group=group_row, topic=topic_row, at=now, lag=lag))
            if previous is not None and previous.lag == lag and previous.partitions == partitions:
                (sampled if due else unchanged).append(previous.id)
                continue
            rows.append(GroupTopic(
                group=group_row, topic=topic_row, lag=lag, updated_at=now, partitions=partitions,
                first_seen_at=previous.first_seen_at if previous else now,
                last_sample_at=now if due else previous.last_sample_at,
            ))
    GroupTopic.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["group", "topic"],
        update_fields=["lag", "updated_at", "last_sample_at", "partitions"],
    )
    GroupTopic.objects.filter(id__in=unchanged).update(updated_at=now)
    GroupTopic.objects.filter(id__in=sampled).update(updated_at=now, last_sample_at=now)
    LagSample.objects.bulk_create(samples)
    cutoff = now - timedelta(hours=settings.LAG_SAMPLE_RETENTION_HOURS)
    LagSample.objects.filter(at__lt=cutoff, group__in=groups.values()).delete()


def _write_findings(
    *, cluster: Cluster, changes: detection.Changes, open_rows: list, topics: dict, groups: dict, generations: dict,
    now: datetime,
) -> dict:
    by_key = {finding_key(row): row for row in open_rows}
    accounting = {a.key: a for a in changes.accounting}
    new_rows = []
    for key in changes.new_findings:
        row = Finding(
            cluster=cluster, group=groups[key.group_id], topic=topics[key.topic], partition=key.partition,
            generation=generations[(key.topic, key.generation)], created_at=now,
            first_log_start=accounting[key].first_log_start,
        )
        _apply_accounting(row, accounting[key], now)
        new_rows.append(row)
    # The cluster row lock serialises polls, and the unique constraint backs it up.
    Finding.objects.bulk_create(new_rows)
    updated = []
    for key, row in by_key.items():
        if key in accounting:
            _apply_accounting(row, accounting[key], now)
            updated.append(row)
    Finding.objects.bulk_update(updated, [*ACCOUNTED_FIELDS, "updated_at"], batch_size=1000)
    _close_expired(cluster=cluster, by_key=by_key, changes=changes, accounting=accounting, now=now)
    return {**by_key, **{finding_key(row): row for row in new_rows}}


def _close_expired(*, cluster: Cluster, by_key: dict, changes: detection.Changes, accounting: dict,
                   now: datetime) -> None:
    """Expiry, the poll's one way out (written by services/lifecycle, like
    the others): the topic was deleted or recreated, or retention deleted
    the whole missed range."""
    reasons = {key: "topic deleted or recreated: its offsets are gone" for key in changes.closed_findings}
    reasons.update(
        (key, f"retention deleted all {accounting[key].expired} missed messages before they were replayed")
        for key in changes.expired_findings
    )
    findings_expire(cluster=cluster, closing=[(by_key[key], reason) for key, reason in sorted(reasons.items()) if key in by_key],
                    now=now)


def _write_audit_and_notifications(
    *, cluster: Cluster, changes: detection.Changes, findings: dict, groups: Sequence[GroupSnapshot],
) -> list[Notification]:
    AuditEvent.objects.bulk_create(
        AuditEvent(
            system=True, cluster=cluster,
            action="finding.created" if t.old_state is None else "finding.state_changed",
            # Named, so the finding's page finds its trail by id.
            object_type="finding" if t.key in findings else "",
            object_id=str(findings[t.key].id) if t.key in findings else "",
            detail={"group": t.key.group_id, "topic": t.key.topic, "partition": t.key.partition,
                    "generation": t.key.generation, "from": t.old_state, "to": t.new_state},
        )
        for t in changes.transitions
    )
    accounting = {a.key: a for a in changes.accounting}
    types = {group.group_id: group.type for group in groups}
    events = []
    for transition in changes.transitions:
        if transition.old_state is not None and transition.new_state not in NOTIFY_STATES:
            continue
        event = "finding.created" if transition.old_state is None else f"finding.{transition.new_state}"
        a = accounting[transition.key]
        events.append((event, {
            "event": event, "cluster": cluster.name, "group": a.key.group_id,
            "group_type": group_kind(types.get(a.key.group_id, ""), a.key.group_id), "topic": a.key.topic,
            "partition": a.key.partition, "generation": a.key.generation, "state": a.state,
            "previous_state": transition.old_state, "lag": a.lag, "missed_definite": a.missed_definite,
            "missed_possible": a.missed_possible, "policy_source": a.policy_source,
            "missed_definite_if_latest": a.missed_definite_if_latest,
            "missed_possible_if_latest": a.missed_possible_if_latest, "explanation": a.explanation,
        }, findings.get(transition.key)))
    return notifications_create(cluster=cluster, events=events)


def finding_record_count_write(*, finding_id: int, counted: CountedRange) -> bool:
    """Store a count of a finding's range, only while its backfill range is
    still the range counted (compare-and-set: a poll that moved it since
    wins). An observation like a poll's accounting: no audit row. Returns
    whether it was stored."""
    return bool(Finding.objects.filter(
        id=finding_id, closed_at__isnull=True, backfill_start=counted.start, backfill_end=counted.end,
    ).update(records_start=counted.start, records_end=counted.end, records_read_committed=counted.read_committed,
             records_read_uncommitted=counted.read_uncommitted))
