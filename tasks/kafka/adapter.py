"""The only module that imports confluent-kafka.

It turns the client's answers into plain data (``groups.domain.snapshot``) and raises
one error type, ``KafkaUnavailable``. Creating an adapter opens no connection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType

from groups.domain.cluster_config import ClusterConfig
from groups.domain.secrets import secret_redact
from groups.domain.snapshot import GroupSnapshot, MemberSnapshot, PartitionOffsets, Snapshot, TopicSnapshot

TOPICS_PER_DESCRIBE = 500
GROUPS_PER_DESCRIBE = 100
# librdkafka enforces request_timeout itself; this only guards against a
# future that is never completed, so a poll can never hang.
_WAIT_GRACE_SECONDS = 5.0

# Errors of describe_topics that mean "this topic no longer exists".
_TOPIC_GONE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID, KafkaError._UNKNOWN_TOPIC})
# Partition-level errors of list_offsets while a topic is being created or
# deleted, or a leader moves: a topic created a moment ago answers NOT_LEADER
# for ~20 ms; one being deleted answers _NOENT ("No leaders found") or
# UNKNOWN_TOPIC. Kafka's own admin client retries these; so do we, within the
# timeout, and drop the topic only if describing it again says it is gone.
_PARTITION_TROUBLE = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.UNKNOWN_TOPIC_ID,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._NOENT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)
_FIRST_RETRY_SECONDS = 0.05
# The broker's names for the states the client knows; KIP-848 states the
# client does not know ("Assigning", "Reconciling") arrive as UNKNOWN.
_STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}


class KafkaUnavailable(Exception):
    """The cluster could not be reached, or answered with an error or with
    only part of an answer. ``stage`` names the step that failed ("ping",
    "topics", "watermarks", "groups", "offsets", "group", "commit")."""

    def __init__(self, message: str, *, bootstrap_servers: str = "", stage: str = "") -> None:
        super().__init__(message)
        self.bootstrap_servers = bootstrap_servers
        self.stage = stage


class GroupNotEmpty(KafkaUnavailable):
    """The broker refused an administrative offset commit because the group
    has members (UNKNOWN_MEMBER_ID and kin): nothing was committed."""


# Answers to an admin offset commit (no member id, generation -1) that mean
# "the group has members now" (classic and KIP-848 groups).
_GROUP_ACTIVE = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.NON_EMPTY_GROUP,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
    }
)


@dataclass(frozen=True)
class GroupStatus:
    """One group as the broker describes it now. A group the broker does not
    know is reported as "Dead" with no members, as the broker itself does."""

    group_id: str
    state: str
    type: str
    member_count: int

    @property
    def inactive(self) -> bool:
        """Whether an administrative offset commit can be accepted (Kafka's
        own reset tool asks for the same: Empty or Dead, no members)."""
        return self.member_count == 0 and self.state in ("Empty", "Dead")


@dataclass(frozen=True)
class TopicDetails:
    name: str
    topic_id: str
    partitions: int
    replication_factor: int


class KafkaAdapter:
    """Reads a cluster. Every request carries ``timeout`` as its request
    timeout; at most ``max_in_flight`` admin calls are outstanding at once.

    After ``snapshot`` returns, ``last_timings`` holds the seconds each stage
    took (topics, watermarks, groups, offsets) and ``last_peak_in_flight`` the
    most calls a stage had outstanding at once.
    """

    def __init__(self, config: ClusterConfig, *, timeout: float = 10.0, max_in_flight: int = 32) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._config = config
        self._timeout = timeout
        self._max_in_flight = max_in_flight
        self._admin: AdminClient | None = None
        self.last_timings: dict[str, float] = {}
        self.last_peak_in_flight: dict[str, int] = {}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(
                {**self._config.client_config(), "socket.timeout.ms": int(self._timeout * 1000)}
            )
        return self._admin

    def ping(self) -> int:
        """Ask the cluster for its metadata; return the number of brokers."""
        try:
            metadata = self.admin.list_topics(timeout=self._timeout)
        except KafkaException as error:
            raise self._unavailable("ping", _describe(error)) from None
        if not metadata.brokers:
            raise self._unavailable("ping", "no brokers in metadata")
        return len(metadata.brokers)

    def snapshot(self, *, cluster: str, now: datetime) -> Snapshot:
        """Read everything one poll needs, in this order:

        1. topics: names from metadata, then topic ids and partitions;
        2. watermarks: log start and high watermark of every partition;
        3. groups: list, then describe (state, type, members, assignments);
        4. offsets: the committed offsets of every group.

        Watermarks are read before groups on purpose: when steps 3 and 4 see
        no owner and no commit on a partition, a group that picks it up later
        starts at or above the high watermark read in step 2, so that value
        safely bounds what was written before the group could read it (H_k in
        DESIGN section 3).

        Any error raises ``KafkaUnavailable``; a partial answer is an error,
        never a smaller cluster. Only what is confirmed gone is skipped: a
        topic deleted during the poll (confirmed by describing it again), and
        a group that is Dead or not found when described or when its offsets
        are fetched.
        """
        self.last_timings = {}
        self.last_peak_in_flight = {}
        with self._stage("topics"):
            described = self._read_topics()
        with self._stage("watermarks"):
            topics = self._read_watermarks(described)
        with self._stage("groups"):
            groups = self._read_groups()
        with self._stage("offsets"):
            committed = self._read_committed([group.group_id for group in groups])
        return Snapshot(
            cluster=cluster,
            taken_at=now,
            topics=topics,
            groups=tuple(
                GroupSnapshot(
                    group_id=group.group_id,
                    state=group.state,
                    type=group.type,
                    assignor=group.assignor,
                    members=group.members,
                    committed=committed[group.group_id],
                )
                for group in groups
                if group.group_id in committed
            ),
        )

    def partition_offsets(self, *, topic: str, partitions: Sequence[int]) -> dict[int, PartitionOffsets]:
        """Log start and high watermark of some partitions of one topic, now
        (executors check these again right before acting)."""
        if not partitions:
            return {}
        found: dict[str, dict[int, int]] = {"log_start": {}, "high_watermark": {}}
        for field_name, spec in (("log_start", OffsetSpec.earliest()), ("high_watermark", OffsetSpec.latest())):
            try:
                futures = self.admin.list_offsets(
                    {TopicPartition(topic, partition): spec for partition in partitions},
                    isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=self._timeout,
                )
            except KafkaException as error:
                raise self._unavailable("watermarks", f"list offsets of {topic!r}: {_describe(error)}") from None
            for key, future in futures.items():
                try:
                    found[field_name][key.partition] = future.result(timeout=self._timeout + 5).offset
                except Exception as error:  # noqa: BLE001 - KafkaException or a timeout: both mean no answer
                    raise self._unavailable(
                        "watermarks", f"list offsets of {topic!r} [{key.partition}]: {_describe(error)}"
                    ) from None
        return {
            partition: PartitionOffsets(partition=partition, log_start=found["log_start"][partition],
                                        high_watermark=found["high_watermark"][partition])
            for partition in partitions
        }

    def topic_partition_ids(self, *, topic: str) -> tuple[int, ...] | None:
        """The partition ids of one topic, or None when the topic does not
        exist. Describes the topic: never creates it, even on a broker with
        ``auto.create.topics.enable``."""
        try:
            futures = self.admin.describe_topics(TopicCollection([topic]), request_timeout=self._timeout)
            description = futures[topic].result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if _code(error) in _TOPIC_GONE:
                return None
            raise self._unavailable("topics", f"describe topic {topic!r}: {_describe(error)}") from None
        return tuple(sorted(partition.id for partition in description.partitions))

    def describe_group(self, *, group_id: str) -> GroupStatus:
        """State and member count of one group, now."""
        try:
            futures = self.admin.describe_consumer_groups([group_id], request_timeout=self._timeout)
            description = futures[group_id].result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if _code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                return GroupStatus(group_id=group_id, state="Dead", type="", member_count=0)
            raise self._unavailable("group", f"describe group {group_id!r}: {_describe(error)}") from None
        state = getattr(description, "state", ConsumerGroupState.UNKNOWN)
        described = _group_from(group_id, state, description)
        return GroupStatus(group_id=group_id, state=described.state, type=described.type,
                           member_count=len(described.members))

    def committed_offsets(
        self, *, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int | None]:
        """The group's committed offset (next message to read) on each of
        ``partitions``; None where it has no commit. Errors at the group or
        at any partition raise ``KafkaUnavailable``."""
        if not partitions:
            return {}
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(topic, partition) for topic, partition in partitions]
        )
        try:
            future = self.admin.list_consumer_group_offsets([request], request_timeout=self._timeout)[group_id]
            answer = future.result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if _code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                return {key: None for key in partitions}
            raise self._unavailable("offsets", f"committed offsets of group {group_id!r}: {_describe(error)}") from None
        found: dict[tuple[str, int], int | None] = {}
        for partition in answer.topic_partitions or []:
            if partition.error is not None:
                raise self._unavailable(
                    "offsets",
                    f"committed offset of group {group_id!r} on {partition.topic!r} [{partition.partition}]: "
                    f"{_describe(partition.error)}",
                )
            found[(partition.topic, partition.partition)] = partition.offset if partition.offset >= 0 else None
        missing = [key for key in partitions if key not in found]
        if missing:
            raise self._unavailable("offsets", f"committed offsets of group {group_id!r}: no answer for {missing}")
        return {key: found[key] for key in partitions}

    def alter_group_offsets(self, *, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` (next message to read) for one group, as an
        administrator. The broker accepts this only while the group has no
        members; otherwise ``GroupNotEmpty`` is raised and nothing changed.
        Any other group- or partition-level error raises ``KafkaUnavailable``:
        then the commit may or may not have been applied, so callers read the
        offsets back before trusting either outcome."""
        if not offsets:
            raise ValueError("no offsets to commit")
        negative = sorted(key for key, offset in offsets.items() if offset < 0)
        if negative:
            raise ValueError(f"offsets must not be negative: {negative}")
        request = ConsumerGroupTopicPartitions(
            group_id,
            [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())],
        )
        try:
            future = self.admin.alter_consumer_group_offsets([request], request_timeout=self._timeout)[group_id]
            answer = future.result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._commit_error(group_id, _describe(error), _code(error)) from None
        refused = [partition for partition in answer.topic_partitions or [] if partition.error is not None]
        if refused:
            first = refused[0]
            raise self._commit_error(
                group_id,
                f"{first.topic!r} [{first.partition}]: {_describe(first.error)}"
                + (f" (and {len(refused) - 1} more partition(s))" if len(refused) > 1 else ""),
                _code(first.error),
            )

    def offsets_for_times(
        self, *, topic: str, partitions: Sequence[int], timestamp_ms: int
    ) -> dict[int, int | None]:
        """Per partition, the first offset whose timestamp is at or after
        ``timestamp_ms``; None when no message is that recent (Kafka answers
        -1: "the end")."""
        if not partitions:
            return {}
        try:
            futures = self.admin.list_offsets(
                {TopicPartition(topic, partition): OffsetSpec.for_timestamp(timestamp_ms) for partition in partitions},
                isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=self._timeout,
            )
        except KafkaException as error:
            raise self._unavailable("watermarks", f"offsets for times of {topic!r}: {_describe(error)}") from None
        found: dict[int, int | None] = {}
        for key, future in futures.items():
            try:
                offset = future.result(timeout=self._timeout + _WAIT_GRACE_SECONDS).offset
            except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
                raise self._unavailable(
                    "watermarks", f"offset for time of {topic!r} [{key.partition}]: {_describe(error)}"
                ) from None
            found[key.partition] = offset if offset >= 0 else None
        return {partition: found[partition] for partition in partitions}

    def _commit_error(self, group_id: str, detail: str, code: int | None) -> KafkaUnavailable:
        error = self._unavailable("commit", f"commit offsets of group {group_id!r}: {detail}")
        if code in _GROUP_ACTIVE:
            return GroupNotEmpty(str(error), bootstrap_servers=error.bootstrap_servers, stage="commit")
        return error

    # -- for the Spark backfill: replay topics and reading spans back ------------

    def describe_topic(self, topic: str) -> TopicDetails | None:
        """Id, partition count and replication factor; None if the topic does not exist."""
        try:
            future = self.admin.describe_topics(TopicCollection([topic]), request_timeout=self._timeout)[topic]
            description = future.result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            code = _code(error)
            if code in _TOPIC_GONE:
                return None
            raise self._unavailable("backfill", f"describe topic {topic!r}: {error}") from None
        partitions = description.partitions
        return TopicDetails(
            name=topic, topic_id=str(description.topic_id) if description.topic_id is not None else "",
            partitions=len(partitions), replication_factor=max((len(p.replicas) for p in partitions), default=1),
        )

    def create_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        try:
            future = self.admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
                request_timeout=self._timeout,
            )[topic]
            future.result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if _code(error) != KafkaError.TOPIC_ALREADY_EXISTS:  # created by someone else meanwhile: fine
                raise self._unavailable("backfill", f"create topic {topic!r}: {error}") from None

    def topic_compacted(self, topic: str) -> bool:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            configs = self.admin.describe_configs([resource], request_timeout=self._timeout)[resource].result(
                timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._unavailable("backfill", f"describe configs of {topic!r}: {error}") from None
        policy = configs.get("cleanup.policy")
        return "compact" in (policy.value or "") if policy is not None else False

    def visible_runs(self, *, topic: str, partition: int, start: int, end: int, committed_only: bool,
                     deadline: float) -> list[tuple[int, int]]:
        """The offsets of ``[start, end)`` a reader can read now, as runs of
        consecutive offsets (half-open). The reader is assigned the partition
        directly: it joins no group and commits nothing."""
        consumer = Consumer({
            **self._config.client_config(),
            "group.id": f"gapwatch-backfill-probe-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "auto.offset.reset": "earliest",
        })
        runs: list[list[int]] = []
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while True:
                at_end = False
                for message in consumer.consume(num_messages=10_000, timeout=1.0):
                    if message.error():
                        if message.error().code() == KafkaError._PARTITION_EOF:
                            at_end = True
                            continue
                        raise self._unavailable("backfill", f"read {topic!r} [{partition}]: {message.error()}")
                    offset = message.offset()
                    if start <= offset < end:
                        if runs and runs[-1][1] == offset:
                            runs[-1][1] = offset + 1
                        else:
                            runs.append([offset, offset + 1])
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                if at_end or position >= end or (runs and runs[-1][1] >= end):
                    return [(a, b) for a, b in runs]
                if time.monotonic() > deadline:
                    raise self._unavailable("backfill", f"reading {topic!r} [{partition}] [{start}, {end}) took too long")
        except KafkaException as error:
            raise self._unavailable("backfill", f"read {topic!r} [{partition}]: {error}") from None
        finally:
            consumer.close()

    # -- 1. topics ---------------------------------------------------------

    def _read_topics(self) -> dict[str, _DescribedTopic]:
        try:
            names = sorted(self.admin.list_topics(timeout=self._timeout).topics)
        except KafkaException as error:
            raise self._unavailable("topics", f"metadata: {_describe(error)}") from None
        described: dict[str, _DescribedTopic] = {}

        def handle(name: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if _code(error) in _TOPIC_GONE:
                    return  # deleted since list_topics
                raise self._unavailable("topics", f"describe topic {name!r}: {_describe(error)}")
            description = future.result()
            described[name] = _DescribedTopic(
                name=name,
                topic_id=_topic_id(description),
                is_internal=bool(description.is_internal),
                partition_ids=tuple(sorted(partition.id for partition in description.partitions)),
            )

        self._gather(
            "topics",
            (
                lambda batch=batch: self.admin.describe_topics(
                    TopicCollection(list(batch)), request_timeout=self._timeout
                )
                for batch in _chunks(names, TOPICS_PER_DESCRIBE)
            ),
            handle,
        )
        return described

    # -- 2. watermarks -----------------------------------------------------

    def _read_watermarks(self, described: dict[str, _DescribedTopic]) -> tuple[TopicSnapshot, ...]:
        """Log start offsets first, then high watermarks, so that within one
        partition ``log_start <= high_watermark`` always holds. A topic is
        left out only when describing it again shows it deleted (or
        recreated under a new topic id) since step 1."""
        partitions = [(topic.name, partition) for topic in described.values() for partition in topic.partition_ids]
        deadline = time.monotonic() + self._timeout
        gone: set[str] = set()
        log_starts = self._list_offsets(described, partitions, OffsetSpec.earliest(), gone, deadline)
        high_watermarks = self._list_offsets(described, partitions, OffsetSpec.latest(), gone, deadline)
        return tuple(
            TopicSnapshot(
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=topic.is_internal,
                partitions=tuple(
                    PartitionOffsets(
                        partition=partition,
                        log_start=log_starts[(topic.name, partition)],
                        high_watermark=high_watermarks[(topic.name, partition)],
                    )
                    for partition in topic.partition_ids
                ),
            )
            for topic in sorted(described.values(), key=lambda topic: topic.name)
            if topic.name not in gone
        )

    def _list_offsets(
        self,
        described: dict[str, _DescribedTopic],
        partitions: Sequence[tuple[str, int]],
        spec: OffsetSpec,
        gone: set[str],
        deadline: float,
    ) -> dict[tuple[str, int], int]:
        """1. One ListOffsets call for all partitions (the client sends one
           request per partition leader).
        2. Partitions that answered with a ``_PARTITION_TROUBLE`` error:
           describe their topics again; topics found gone join ``gone``.
        3. Ask again for the rest, with backoff, until ``deadline``; then
           the trouble is an error."""
        offsets: dict[tuple[str, int], int] = {}
        backoff = _FIRST_RETRY_SECONDS
        partitions = [key for key in partitions if key[0] not in gone]
        while partitions:
            troubled: dict[tuple[str, int], BaseException] = {}

            def handle(key: TopicPartition, future: Future) -> None:
                error = future.exception()
                if error is None:
                    offsets[(key.topic, key.partition)] = future.result().offset
                elif _code(error) in _PARTITION_TROUBLE:
                    troubled[(key.topic, key.partition)] = error
                else:
                    raise self._unavailable(
                        "watermarks", f"list offsets of {key.topic!r} [{key.partition}]: {_describe(error)}"
                    )

            request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
            self._gather(
                "watermarks",
                [
                    lambda: self.admin.list_offsets(
                        request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=self._timeout
                    )
                ],
                handle,
            )
            if troubled:
                gone |= self._topics_gone(described, {topic for topic, _ in troubled})
                troubled = {key: error for key, error in troubled.items() if key[0] not in gone}
            if troubled and time.monotonic() + backoff > deadline:
                (topic, partition), error = min(troubled.items())
                raise self._unavailable(
                    "watermarks",
                    f"list offsets of {topic!r} [{partition}]: {_describe(error)}; "
                    f"{len(troubled)} partition(s) still without an answer after {self._timeout:g}s",
                )
            if troubled:
                time.sleep(backoff)
                backoff *= 2
            partitions = sorted(troubled)
        return offsets

    def _topics_gone(self, described: dict[str, _DescribedTopic], names: set[str]) -> set[str]:
        """Which of ``names`` are deleted, or recreated under another topic id."""
        gone: set[str] = set()

        def handle(name: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if _code(error) in _TOPIC_GONE:
                    gone.add(name)
                    return
                raise self._unavailable("watermarks", f"describe topic {name!r}: {_describe(error)}")
            if _topic_id(future.result()) != described[name].topic_id:
                gone.add(name)

        self._gather(
            "watermarks",
            [lambda: self.admin.describe_topics(TopicCollection(sorted(names)), request_timeout=self._timeout)],
            handle,
        )
        return gone

    # -- 3. groups ---------------------------------------------------------

    def _read_groups(self) -> list[_DescribedGroup]:
        """List, then describe in batches. The client lists classic and
        consumer (KIP-848) groups only; share and streams groups are not
        reported by it, so they are not in the snapshot."""
        try:
            listing = self.admin.list_consumer_groups(request_timeout=self._timeout)
            result = listing.result(timeout=self._timeout + _WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - a failed or missing answer, whatever its type
            raise self._unavailable("groups", f"list groups: {_describe(error)}") from None
        if result.errors:
            raise self._unavailable(
                "groups", f"list groups: {'; '.join(_describe(error) for error in result.errors)}"
            )
        # The client cannot describe or fetch offsets of the empty group id.
        group_ids = sorted({entry.group_id for entry in result.valid or [] if entry.group_id})
        groups: list[_DescribedGroup] = []

        def handle(group_id: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if _code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                    return  # deleted since it was listed
                raise self._unavailable("groups", f"describe group {group_id!r}: {_describe(error)}")
            description = future.result()
            state = getattr(description, "state", ConsumerGroupState.UNKNOWN)
            if state == ConsumerGroupState.DEAD:
                return  # deleted (or expired) since it was listed
            groups.append(_group_from(group_id, state, description))

        self._gather(
            "groups",
            (
                lambda batch=batch: self.admin.describe_consumer_groups(list(batch), request_timeout=self._timeout)
                for batch in _chunks(group_ids, GROUPS_PER_DESCRIBE)
            ),
            handle,
        )
        return sorted(groups, key=lambda group: group.group_id)

    # -- 4. committed offsets ---------------------------------------------

    def _read_committed(self, group_ids: Sequence[str]) -> dict[str, dict[tuple[str, int], int]]:
        """The client fetches one group per call (confluent-kafka-python
        #1947), so calls run concurrently, at most ``max_in_flight`` at once.
        An offset below zero (OFFSET_INVALID) means "no commit": left out."""
        committed: dict[str, dict[tuple[str, int], int]] = {}

        def handle(group_id: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if _code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                    return  # deleted since it was described
                raise self._unavailable("offsets", f"committed offsets of group {group_id!r}: {_describe(error)}")
            offsets: dict[tuple[str, int], int] = {}
            for partition in future.result().topic_partitions or []:
                if partition.error is not None:
                    raise self._unavailable(
                        "offsets",
                        f"committed offset of group {group_id!r} on {partition.topic!r} [{partition.partition}]: "
                        f"{_describe(partition.error)}",
                    )
                if partition.offset >= 0:
                    offsets[(partition.topic, partition.partition)] = partition.offset
            committed[group_id] = offsets

        self._gather(
            "offsets",
            (
                lambda group_id=group_id: self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group_id)], request_timeout=self._timeout
                )
                for group_id in group_ids
            ),
            handle,
        )
        return committed

    # -- plumbing ----------------------------------------------------------

    def _gather(
        self,
        stage: str,
        calls: Iterable[Callable[[], dict[Any, Future]]],
        handle: Callable[[Any, Future], None],
    ) -> None:
        """Run admin calls with at most ``max_in_flight`` outstanding and hand
        every answered future to ``handle`` as its call completes. The first
        error stops issuing further calls, so a dead cluster fails a stage in
        about one request timeout, not one per call."""
        in_flight: list[dict[Any, Future]] = []
        peak = 0

        def settle(until: int) -> None:
            nonlocal in_flight
            while len(in_flight) > until:
                self._wait_any(stage, [f for call in in_flight for f in call.values()])
                still: list[dict[Any, Future]] = []
                for call in in_flight:
                    if all(future.done() for future in call.values()):
                        for key, future in call.items():
                            handle(key, future)
                    else:
                        still.append(call)
                in_flight = still

        for call in calls:
            settle(self._max_in_flight - 1)
            try:
                in_flight.append(call())
            except KafkaException as error:
                raise self._unavailable(stage, _describe(error)) from None
            peak = max(peak, len(in_flight))
        settle(0)
        self.last_peak_in_flight[stage] = max(peak, self.last_peak_in_flight.get(stage, 0))

    def _wait_any(self, stage: str, futures: Sequence[Future]) -> None:
        pending = [future for future in futures if not future.done()]
        if not pending:
            return
        done, _ = wait(pending, timeout=self._timeout + _WAIT_GRACE_SECONDS, return_when=FIRST_COMPLETED)
        if not done:
            raise self._unavailable(stage, f"no answer within {self._timeout:g}s")

    @contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.last_timings[name] = time.monotonic() - started

    def _unavailable(self, stage: str, detail: str) -> KafkaUnavailable:
        message = secret_redact(f"Kafka at {self._config.bootstrap_servers}: {stage}: {detail}",
                                self._config.sasl_password)
        return KafkaUnavailable(message, bootstrap_servers=self._config.bootstrap_servers, stage=stage)


@dataclass(frozen=True)
class _DescribedTopic:
    name: str
    topic_id: str
    is_internal: bool
    partition_ids: tuple[int, ...]


@dataclass(frozen=True)
class _DescribedGroup:
    group_id: str
    state: str
    type: str
    assignor: str
    members: tuple[MemberSnapshot, ...]


def _group_from(group_id: str, state: ConsumerGroupState, description: Any) -> _DescribedGroup:
    """A ConsumerGroupDescription as plain data, members sorted by id."""
    members = (
        MemberSnapshot(
            member_id=member.member_id,
            client_id=member.client_id or "",
            host=member.host or "",
            assignment=frozenset(
                (partition.topic, partition.partition)
                for partition in (member.assignment.topic_partitions if member.assignment else [])
            ),
        )
        for member in description.members or []
    )
    return _DescribedGroup(
        group_id=group_id,
        state=_STATE_NAMES.get(state, state.name.title()),
        type=getattr(description, "type", ConsumerGroupType.UNKNOWN).name.lower(),
        assignor=description.partition_assignor or "",
        members=tuple(sorted(members, key=lambda member: member.member_id)),
    )


def _topic_id(description: Any) -> str:
    return str(description.topic_id) if description.topic_id is not None else ""


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _code(error: BaseException | KafkaError) -> int | None:
    if isinstance(error, KafkaError):
        return error.code()
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0].code()
    return None


def _describe(error: BaseException | KafkaError) -> str:
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
