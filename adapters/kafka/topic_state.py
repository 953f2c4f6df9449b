"""The topic as the broker holds it now, for people to look at: each
partition's leader, replicas and in-sync replicas with its start and end
offsets and, where the broker gives them (DescribeLogDirs, through Kafka's
Java client: librdkafka has no such call), its replicas' sizes on disk; and
the topic's configs with where each value comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from confluent_kafka import TopicCollection
from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

from groups.domain.urgency import Retention
from adapters.kafka.client import WAIT_GRACE_SECONDS
from adapters.kafka.errors import KafkaUnavailable, describe_error
from adapters.kafka.group_reads import GroupReads
from adapters.kafka.topics import TopicOperations


@dataclass(frozen=True)
class PartitionState:
    """One partition now. Offsets are next-to-read: ``log_start`` the first
    offset still stored, ``high_watermark`` the end. ``sizes``: bytes on
    disk by broker id, for the replicas the broker reported (empty: none)."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]
    log_start: int
    high_watermark: int
    sizes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class TopicConfig:
    """One config entry: ``source`` the broker's word (DYNAMIC_TOPIC_CONFIG,
    DEFAULT_CONFIG, ...); ``sensitive`` entries come without a value."""

    name: str
    value: str | None
    is_default: bool
    source: str
    sensitive: bool


def _replica_sizes(text: str, topic: str) -> dict[tuple[int, int], int]:
    """Sizes by (partition, broker) from the Java answer's text: per broker
    ``{id={dir=LogDirDescription(replicaInfos={topic-0=ReplicaInfo(size=N, ...`` (Kafka 3.x and 4.x)."""
    sizes: dict[tuple[int, int], int] = {}
    for broker_text in re.split(r"(?:^\{|, )(?=\d+=\{)", text):
        broker = re.match(r"(\d+)=\{", broker_text)
        if broker is None:
            continue
        pattern = rf"(?:\{{|, ){re.escape(topic)}-(\d+)=ReplicaInfo\(size=(\d+)"
        for partition, size in re.findall(pattern, broker_text):
            sizes[(int(partition), int(broker.group(1)))] = int(size)
    return sizes


def _source_name(source: object) -> str:
    """The ConfigSource's name (DYNAMIC_TOPIC_CONFIG, ...): the client answers its number."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN_CONFIG"


class TopicStateReads(TopicOperations, GroupReads):
    """Needs the offsets of ``TopicOperations`` and the Java client of ``GroupReads``."""

    def topic_configs(self, topic: str) -> tuple[TopicConfig, ...]:
        """Every config of ``topic`` (DescribeConfigs), by name."""
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            configs = self.admin.describe_configs([resource], request_timeout=self._timeout)[resource].result(
                timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._unavailable("configs", f"describe configs of {topic!r}: "
                                    f"{describe_error(error, operation='DescribeConfigs', topic=topic)}",
                                    cause=error) from None
        return tuple(
            TopicConfig(name=name, value=None if entry.is_sensitive else entry.value, is_default=bool(entry.is_default),
                        source=_source_name(entry.source), sensitive=bool(entry.is_sensitive))
            for name, entry in sorted(configs.items())
        )

    def topic_retention(self, topic: str) -> tuple[Retention, str]:
        """The topic's retention and its ``message.timestamp.type`` (CreateTime or LogAppendTime)."""
        configs = {config.name: config.value for config in self.topic_configs(topic)}

        def number(name: str) -> int | None:
            text = configs.get(name)
            return int(text) if text is not None and text.lstrip("-").isdigit() else None
        retention = Retention(retention_ms=number("retention.ms"), retention_bytes=number("retention.bytes"),
                              cleanup_policy=configs.get("cleanup.policy") or "")
        return retention, configs.get("message.timestamp.type") or "CreateTime"

    def topic_partitions(self, topic: str) -> tuple[PartitionState, ...]:
        """Each partition's replicas and offsets now, with their sizes where
        the broker answers DescribeLogDirs (a principal without Describe on
        the cluster, or no Java client here: no sizes, the rest still read)."""
        try:
            description = self.admin.describe_topics(TopicCollection([topic]), request_timeout=self._timeout)[
                topic].result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._unavailable("topics", f"describe topic {topic!r}: {describe_error(error, topic=topic)}",
                                    cause=error) from None
        infos = sorted(description.partitions, key=lambda info: info.id)
        offsets = self.partition_offsets(topic=topic, partitions=[info.id for info in infos])
        brokers = sorted({node.id for info in infos for node in info.replicas})
        sizes = self.replica_sizes(topic, brokers)
        return tuple(
            PartitionState(
                partition=info.id, leader=info.leader.id if info.leader is not None and info.leader.id >= 0 else None,
                replicas=tuple(node.id for node in info.replicas), in_sync=tuple(node.id for node in info.isr),
                log_start=offsets[info.id].log_start, high_watermark=offsets[info.id].high_watermark,
                sizes=tuple((broker, sizes[(info.id, broker)]) for broker in (n.id for n in info.replicas)
                            if (info.id, broker) in sizes),
            )
            for info in infos
        )

    def replica_sizes(self, topic: str, brokers: list[int]) -> dict[tuple[int, int], int]:
        """Bytes on disk by (partition, broker) from DescribeLogDirs; empty
        when the Java client or the broker does not answer it."""
        if not brokers:
            return {}
        try:
            text = self._java.log_dirs_text(brokers)
        except KafkaUnavailable:
            return {}
        return _replica_sizes(text, topic)
