"""The world the core's table-driven stories run in (tests/unit/test_core.py,
tests/unit/test_lifecycle.py), built from plain snapshots.

The stories run on topic ``orders`` (partitions 0 and 1 at generation 1) and
group ``billing``, which reads it. A poll that shows a third partition opens
the finding (billing, orders, 2, generation 2); the steps then say what each
poll saw on partition 2. ``Store`` plays the service: it feeds every poll's
Changes back as the stored state of the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from groups.domain.detection import Changes, FindingKey, FindingState, KnownGroup, KnownTopic, evaluate_snapshot
from groups.domain.snapshot import GroupSnapshot, MemberSnapshot, PartitionOffsets, Snapshot, TopicSnapshot

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
POLL_INTERVAL = timedelta(minutes=1)
ORDERS_ID = "orders-id-1"
NEW_PARTITION = FindingKey(group_id="billing", topic="orders", partition=2, generation=2)


# --- Building snapshots -----------------------------------------------------


def topic(name: str, *offsets: tuple[int, int], topic_id: str | None = None, internal: bool = False) -> TopicSnapshot:
    """A topic whose partition i has (log start, high watermark) = offsets[i],
    and no transaction open (its last stable offset is its high watermark)."""
    return TopicSnapshot(
        name=name,
        topic_id=topic_id or f"{name}-id-1",
        is_internal=internal,
        partitions=tuple(PartitionOffsets(p, start, end, end) for p, (start, end) in enumerate(offsets)),
    )


def orders(partition_count: int, *, topic_id: str = ORDERS_ID) -> TopicSnapshot:
    return topic("orders", *[(0, 1000)] * partition_count, topic_id=topic_id)


def group(group_id: str, *, owns: tuple[tuple[str, int], ...] = (), commits: dict | None = None) -> GroupSnapshot:
    """A group with one member owning ``owns`` and the given commits."""
    member = MemberSnapshot(
        member_id=f"{group_id}-1", client_id=f"{group_id}-app", host="/10.0.0.7", assignment=frozenset(owns)
    )
    return GroupSnapshot(
        group_id=group_id, state="Stable", type="classic", assignor="range",
        members=(member,) if owns else (), committed=dict(commits or {}),
    )


def billing_reading(*partitions: int) -> GroupSnapshot:
    """billing owns and has committed 1000 on the given orders partitions."""
    return group(
        "billing",
        owns=tuple(("orders", p) for p in partitions),
        commits={("orders", p): 1000 for p in partitions},
    )


def poll(*topics: TopicSnapshot, groups: tuple[GroupSnapshot, ...] = (), scope: frozenset | None = None) -> Snapshot:
    return Snapshot(cluster="main", taken_at=T0, topics=topics, groups=groups, scope=scope)


# Within each poll: group descriptions are requested 100 ms after it starts, and it ends at 200 ms.
GROUPS_FROM, OBSERVED_UNTIL = timedelta(milliseconds=100), timedelta(milliseconds=200)


@dataclass(frozen=True)
class Step:
    """What one poll saw on orders partition 2 (partitions 0 and 1 are steady)."""

    log_start: int
    high_watermark: int
    owned: bool = False
    commit: int | None = None
    guard_start: int | None = None  # reported by the consumer-side guard before this poll
    targeted: bool = False  # the watcher's snapshot of orders only, not a full poll
    target: bool = False  # KIP-848: partition 2 is in the member's target assignment
    likely_start: int | None = None  # resolved from the time index and handed to this poll
    # billing as a share group (KIP-932): its share.auto.offset.reset as the
    # cluster states it, (policy, setting in words); ``commit`` is then its start offset.
    share: tuple[str, str] | None = None
    # A transaction open on partition 2 from this offset: the last stable offset
    # (default: none open, the LSO is the high watermark). ``stable_unread``: the
    # poll did not read the LSO at all.
    open_transaction_from: int | None = None
    stable_unread: bool = False

    def snapshot(self, now: datetime = T0) -> Snapshot:
        owns = [("orders", 0), ("orders", 1)] + ([("orders", 2)] if self.owned else [])
        commits = {("orders", 0): 1000, ("orders", 1): 1000}
        if self.commit is not None:
            commits[("orders", 2)] = self.commit
        orders_now = topic("orders", (0, 1000), (0, 1000), (self.log_start, self.high_watermark), topic_id=ORDERS_ID)
        stable = None if self.stable_unread else (
            self.high_watermark if self.open_transaction_from is None else self.open_transaction_from)
        orders_now = replace(orders_now, partitions=orders_now.partitions[:2] + (
            replace(orders_now.partitions[2], last_stable_offset=stable),))
        billing = group("billing", owns=tuple(owns), commits=commits)
        if self.target:
            (member,) = billing.members
            billing = replace(billing, members=(replace(member, target_assignment=frozenset(owns) | {("orders", 2)}),))
        if self.share is not None:
            billing = replace(billing, type="share", assignor="simple", reset_policy=self.share[0],
                              reset_setting=self.share[1])
        return replace(
            poll(orders_now, groups=(billing,), scope=frozenset({"orders"}) if self.targeted else None),
            taken_at=now, groups_from=now + GROUPS_FROM, observed_until=now + OBSERVED_UNTIL,
        )


@dataclass
class Store:
    """Stored state between polls, updated from each poll's Changes as the service would."""

    topics: dict[str, KnownTopic]
    groups: dict[str, KnownGroup]
    findings: dict[FindingKey, FindingState] = field(default_factory=dict)
    unowned_after_polls: int = 30
    now: datetime = T0
    watching: bool = True
    # Gapwatch's commits as a member (issue 43), by (group, topic, partition).
    protections: dict = field(default_factory=dict)

    def apply(self, snapshot: Snapshot, likely_starts: dict | None = None) -> Changes:
        changes = evaluate_snapshot(
            snapshot=snapshot, known_topics=self.topics.values(), known_groups=self.groups.values(),
            open_findings=self.findings.values(), now=self.now, unowned_after_polls=self.unowned_after_polls,
            likely_starts=likely_starts, watching=self.watching, protections=self.protections,
        )
        for proof in changes.policy_evidence:
            known = self.groups.get(proof.group_id, KnownGroup(proof.group_id, frozenset()))
            self.groups[proof.group_id] = replace(known, evidenced_policy=proof.policy, policy_evidence=proof.words)
        for generation in changes.new_generations:
            self.topics[generation.topic] = KnownTopic(
                generation.topic, generation.topic_id, generation.generation, generation.partition_ids
            )
        for name in changes.deleted_topics:
            self.topics[name] = replace(self.topics[name], deleted=True)
        for accounting in changes.accounting:
            self.findings[accounting.key] = accounting.as_state()
        for key in changes.closed_findings:
            del self.findings[key]
        for seen in snapshot.groups:
            if seen.group_id in self.groups:
                known = self.groups[seen.group_id]
                self.groups[seen.group_id] = replace(known, consumed_topics=known.consumed_topics | seen.topics())
        self.now += POLL_INTERVAL
        return changes

    def report_guard(self, key: FindingKey, start_offset: int) -> None:
        self.findings[key] = replace(self.findings[key], guard_start_offset=start_offset)


def key(partition: int, generation: int, group_id: str = "billing", topic_name: str = "orders") -> FindingKey:
    return FindingKey(group_id=group_id, topic=topic_name, partition=partition, generation=generation)


def billing_store(
    *, policy: str = "unknown", also_read: frozenset[str] = frozenset(), unowned_after_polls: int = 30,
    isolation: str = "unknown", **topics: KnownTopic,
) -> Store:
    """orders at generation 1 with partitions 0 and 1, read by billing (plus ``also_read``)."""
    return Store(
        topics={"orders": KnownTopic("orders", ORDERS_ID, 1, frozenset({0, 1})), **topics},
        groups={"billing": KnownGroup("billing", frozenset({"orders"}) | also_read, policy, isolation)},
        unowned_after_polls=unowned_after_polls,
    )
