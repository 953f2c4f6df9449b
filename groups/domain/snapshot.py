"""What one poll read from a cluster, as plain frozen data.

The Kafka adapter (``adapters/kafka/adapter.py``) produces these; the pure core
(``groups/domain/detection.py``) consumes them. Nothing here imports Django or Kafka.

Offsets always mean "the next message to read": a partition's log start
offset is the first offset still stored, its high watermark is the offset the
next produced message will get, so it holds ``high_watermark - log_start``
messages, and every range is half-open ``[start, end)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    # None where the poll did not need it (no finding, no group without a
    # commit on the partition): reading every log start every poll is costly.
    log_start: int | None
    high_watermark: int
    # The last stable offset (ListOffsets read_committed), read beside the high
    # watermark where a poll needs it: below it while a transaction is open, and
    # where a read_committed member starting at latest starts. None: not read.
    last_stable_offset: int | None = None


@dataclass(frozen=True)
class TopicSnapshot:
    name: str
    topic_id: str
    is_internal: bool
    # Sorted by partition id.
    partitions: tuple[PartitionOffsets, ...]

    @property
    def partition_ids(self) -> frozenset[int]:
        return frozenset(p.partition for p in self.partitions)


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    client_id: str
    host: str
    # (topic, partition) pairs currently assigned to this member.
    assignment: frozenset[tuple[str, int]]
    # KIP-848 groups only: what the coordinator has decided to give this member.
    # A partition enters the target first and the (current) assignment once the
    # member has taken it; classic groups report no target (empty).
    target_assignment: frozenset[tuple[str, int]] = frozenset()


@dataclass(frozen=True)
class GroupSnapshot:
    group_id: str
    state: str  # "Stable", "Empty", "PreparingRebalance", "Dead", ... as the broker names it
    type: str  # "classic", "consumer" (KIP-848) or "share" (KIP-932)
    assignor: str
    members: tuple[MemberSnapshot, ...]
    # Committed offset (next message to read) per (topic, partition); a
    # partition without a commit is absent. A share group's is its start
    # offset (the lowest it may still deliver), absent until it initialised p.
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    # How the group starts a partition it has no position on, when the
    # cluster states it (a share group's ``share.auto.offset.reset``):
    # "latest", "earliest" or "by_duration", and the setting in words. None:
    # the client's setting, which only an operator's declaration tells.
    reset_policy: str | None = None
    reset_setting: str = ""

    def owner_of(self, topic: str, partition: int) -> MemberSnapshot | None:
        for member in self.members:
            if (topic, partition) in member.assignment:
                return member
        return None

    def assignee_of(self, topic: str, partition: int) -> MemberSnapshot | None:
        """The member whose target assignment holds the partition (KIP-848): it is taking it now."""
        for member in self.members:
            if (topic, partition) in member.target_assignment:
                return member
        return None

    def topics(self) -> frozenset[str]:
        """Topics this group reads: committed on, or assigned to a member."""
        names = {topic for topic, _ in self.committed}
        for member in self.members:
            names.update(topic for topic, _ in member.assignment)
        return frozenset(names)


@dataclass(frozen=True)
class Snapshot:
    cluster: str
    taken_at: datetime
    topics: tuple[TopicSnapshot, ...]
    groups: tuple[GroupSnapshot, ...]
    # None: the whole cluster. Otherwise a targeted snapshot of only these
    # topics and the groups that read them: a topic outside it is not deleted.
    scope: frozenset[str] | None = None
    # When the group descriptions were requested and when the snapshot ended:
    # a member not owning a partition at the first had not taken it before
    # that instant; one owning it (or a commit) had taken it by the second.
    groups_from: datetime | None = None
    observed_until: datetime | None = None

    @property
    def complete(self) -> bool:
        return self.scope is None

    def topic(self, name: str) -> TopicSnapshot | None:
        for topic in self.topics:
            if topic.name == name:
                return topic
        return None
