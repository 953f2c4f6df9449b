"""The topics' face of the adapter: one topic described or created, the
offsets of some of its partitions now, and for the Spark backfill, its
compaction and the offsets a reader can actually read; for an expansion's
plan, the broker's verdict on a new partition count.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic, OffsetSpec, ResourceType

from groups.domain.expansion.plan import BrokerVerdict
from groups.domain.snapshot import PartitionOffsets
from adapters.kafka.client import WAIT_GRACE_SECONDS, KafkaClient, TopicDetails, topic_details
from adapters.kafka.errors import NO_ANSWER, TOPIC_GONE, describe_error, error_code


class TopicOperations(KafkaClient):
    def describe_topic(self, topic: str) -> TopicDetails | None:
        """Id, partitions, replication factor of one topic and whether the
        principal may Read it; None when it does not exist. Describes the
        topic: never creates it, even on a broker with ``auto.create.topics.enable``."""
        try:
            future = self.admin.describe_topics(TopicCollection([topic]), request_timeout=self._timeout,
                                                include_authorized_operations=True)[topic]
            description = future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if error_code(error) in TOPIC_GONE:
                return None
            raise self._unavailable("topics", f"describe topic {topic!r}: {describe_error(error, topic=topic)}",
                                    cause=error) from None
        return topic_details(topic, description)

    def validate_partitions(self, topic: str, count: int) -> BrokerVerdict:
        """The broker's verdict on raising ``topic`` to ``count`` partitions:
        CreatePartitions with ``validate_only``, so nothing changes. A refusal
        (a count not higher, the cluster's limits, a missing Alter ACL on the
        topic, an unknown topic) is a verdict in words; only a cluster that
        does not answer raises KafkaUnavailable."""
        try:
            future = self.admin.create_partitions([NewPartitions(topic, count)], validate_only=True,
                                                  request_timeout=self._timeout)[topic]
            future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except ValueError as error:  # librdkafka's own limits (at most 100,000 partitions), checked before asking
            return BrokerVerdict(accepted=False, asked=False, reason=f"the client refused it before asking the "
                                 f"broker: {error}")
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if error_code(error) in (None, *NO_ANSWER):
                raise self._unavailable("topics", f"validate {count} partitions for {topic!r}: "
                                        f"{describe_error(error, operation='Alter', topic=topic)}",
                                        cause=error) from None
            return BrokerVerdict(accepted=False, reason=describe_error(error, operation="Alter", topic=topic))
        return BrokerVerdict(accepted=True, reason=f"the broker would raise {topic!r} to {count} partitions")

    def add_partitions(self, topic: str, count: int) -> None:
        """Raise ``topic`` to ``count`` partitions (CreatePartitions). A
        refusal (a count not higher, limits, a missing Alter ACL) or no answer
        raises KafkaUnavailable; after no answer the partitions may exist,
        so callers describe the topic before trying again."""
        try:
            future = self.admin.create_partitions([NewPartitions(topic, count)], request_timeout=self._timeout)[topic]
            future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException, a timeout, librdkafka's own ValueError
            raise self._unavailable("topics", f"add partitions to {topic!r} ({count} in all): "
                                    f"{describe_error(error, operation='Alter', topic=topic)}",
                                    cause=error) from None

    def create_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        try:
            future = self.admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
                request_timeout=self._timeout,
            )[topic]
            future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if error_code(error) != KafkaError.TOPIC_ALREADY_EXISTS:  # created by someone else meanwhile: fine
                raise self._unavailable("backfill", f"create topic {topic!r}: "
                                        f"{describe_error(error, operation='Create', topic=topic)}",
                                        cause=error) from None

    def topic_compacted(self, topic: str) -> bool:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            configs = self.admin.describe_configs([resource], request_timeout=self._timeout)[resource].result(
                timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._unavailable("backfill", f"describe configs of {topic!r}: "
                                    f"{describe_error(error, operation='DescribeConfigs', topic=topic)}",
                                    cause=error) from None
        policy = configs.get("cleanup.policy")
        return "compact" in (policy.value or "") if policy is not None else False

    def topic_timestamp_type(self, topic: str) -> str:
        """``message.timestamp.type`` of a topic: CreateTime (set by producers) or LogAppendTime (by the broker)."""
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            configs = self.admin.describe_configs([resource], request_timeout=self._timeout)[resource].result(
                timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._unavailable("watermarks", f"describe configs of {topic!r}: "
                                    f"{describe_error(error, operation='DescribeConfigs', topic=topic)}",
                                    cause=error) from None
        entry = configs.get("message.timestamp.type")
        return (entry.value if entry is not None else "") or "CreateTime"

    def visible_runs(self, *, topic: str, partition: int, start: int, end: int, committed_only: bool,
                     deadline: float) -> list[tuple[int, int]]:
        """The offsets of ``[start, end)`` a reader can read now, as runs of
        consecutive offsets (half-open). The reader is assigned the partition
        directly: it joins no group and commits nothing."""
        consumer = Consumer({
            **self._config.librdkafka_options(),
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
            raise self._unavailable("backfill", f"read {topic!r} [{partition}]: "
                                    f"{describe_error(error, operation='Read', topic=topic)}", cause=error) from None
        finally:
            consumer.close()

    def partition_offsets(self, *, topic: str, partitions: Sequence[int]) -> dict[int, PartitionOffsets]:
        """Log start and high watermark of some partitions of one topic, now
        (executors check these again right before acting)."""
        found = self._watermarks([TopicPartition(topic, partition) for partition in partitions])
        return {partition: found[(topic, partition)] for partition in partitions}

    def retained_offsets(self, *, max_partitions: int) -> dict[tuple[str, int], PartitionOffsets]:
        """Log start and high watermark, now, of the first ``max_partitions``
        partitions of the cluster's topics by name, internal ones (``__``) and
        those the client may not describe left out: where the Spark server's
        warm-up finds records to read (``adapters.spark.warm_up``)."""
        try:
            topics = self.admin.list_topics(timeout=self._timeout).topics
        except KafkaException as error:
            raise self._unavailable("watermarks", f"list topics: {describe_error(error)}", cause=error) from None
        listed = [TopicPartition(name, partition) for name in sorted(topics)
                  if not name.startswith("__") and topics[name].error is None
                  for partition in sorted(topics[name].partitions)]
        return self._watermarks(listed[:max_partitions])

    def _watermarks(self, partitions: Sequence[TopicPartition]) -> dict[tuple[str, int], PartitionOffsets]:
        """Log start and high watermark of ``partitions`` (of any topics), by (topic, partition)."""
        if not partitions:
            return {}
        found: dict[str, dict[tuple[str, int], int]] = {"log_start": {}, "high_watermark": {}}
        for field_name, spec in (("log_start", OffsetSpec.earliest()), ("high_watermark", OffsetSpec.latest())):
            try:
                futures = self.admin.list_offsets(
                    {TopicPartition(p.topic, p.partition): spec for p in partitions},
                    isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=self._timeout,
                )
            except KafkaException as error:
                topics = sorted({p.topic for p in partitions})
                topic = topics[0] if len(topics) == 1 else None
                what = repr(topic) if topic else f"{len(topics)} topics"
                raise self._unavailable("watermarks", f"list offsets of {what}: {describe_error(error, topic=topic)}",
                                        cause=error) from None
            for key, future in futures.items():
                try:
                    found[field_name][(key.topic, key.partition)] = future.result(timeout=self._timeout + 5).offset
                except Exception as error:  # noqa: BLE001 - KafkaException or a timeout: both mean no answer
                    raise self._unavailable(
                        "watermarks",
                        f"list offsets of {key.topic!r} [{key.partition}]: {describe_error(error, topic=key.topic)}",
                        cause=error,
                    ) from None
        return {
            (p.topic, p.partition): PartitionOffsets(partition=p.partition, log_start=found["log_start"][(p.topic, p.partition)],
                                                     high_watermark=found["high_watermark"][(p.topic, p.partition)])
            for p in partitions
        }

    def last_stable_offsets(self, *, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """The last stable offset of some partitions of one topic, now: the
        end a read_committed reader may read up to (ListOffsets ``latest`` with
        READ_COMMITTED). Below the high watermark while a transaction that
        wrote to the partition is open; equal to it otherwise."""
        if not partitions:
            return {}
        try:
            futures = self.admin.list_offsets(
                {TopicPartition(topic, partition): OffsetSpec.latest() for partition in partitions},
                isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self._timeout,
            )
        except KafkaException as error:
            raise self._unavailable("watermarks", f"last stable offsets of {topic!r}: "
                                    f"{describe_error(error, topic=topic)}", cause=error) from None
        found: dict[int, int] = {}
        for key, future in futures.items():
            try:
                found[key.partition] = future.result(timeout=self._timeout + WAIT_GRACE_SECONDS).offset
            except Exception as error:  # noqa: BLE001 - KafkaException or a timeout: both mean no answer
                raise self._unavailable(
                    "watermarks", f"last stable offset of {topic!r} [{key.partition}]: "
                    f"{describe_error(error, topic=topic)}", cause=error,
                ) from None
        return {partition: found[partition] for partition in partitions}

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
            raise self._unavailable("watermarks", f"offsets for times of {topic!r}: {describe_error(error, topic=topic)}",
                                    cause=error) from None
        found: dict[int, int | None] = {}
        for key, future in futures.items():
            try:
                offset = future.result(timeout=self._timeout + WAIT_GRACE_SECONDS).offset
            except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
                raise self._unavailable(
                    "watermarks", f"offset for time of {topic!r} [{key.partition}]: {describe_error(error, topic=topic)}",
                    cause=error,
                ) from None
            found[key.partition] = offset if offset >= 0 else None
        return {partition: found[partition] for partition in partitions}
