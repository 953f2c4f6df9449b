"""What the watcher asks every second: the partition count of every topic,
and, once a count changed, which groups read the topics (both through Kafka's
Java client where it runs here; librdkafka otherwise)."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaException

from adapters.kafka.errors import describe_error
from adapters.kafka.group_reads import GroupReads
from adapters.kafka.java_admin import JavaAdmin


class WatchReads(GroupReads):
    def partition_counts(self, *, java: bool = True) -> dict[str, int]:
        """Partition count of every topic, from one metadata request: what the
        watcher compares every second to see partitions added. Through the
        Java helper when ``java`` and it is installed (one line per topic; 60k
        partitions as librdkafka's Python objects cost 0.2 s of CPU a tick),
        else through librdkafka."""
        counts = self._from_java("partition counts", JavaAdmin.partition_counts) if java else None
        if counts is not None:
            return counts
        try:
            metadata = self.admin.list_topics(timeout=self._timeout)
        except KafkaException as error:
            raise self._unavailable("topics", f"metadata: {describe_error(error)}", cause=error) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    def topic_readers(self, counts: Mapping[str, int], *, java: bool = True) -> set[str] | None:
        """The classic and consumer groups that read any of the topics in
        ``counts`` (name -> partition count), asked of every group the
        poll's own listing finds, through the Java helper
        (``JavaAdmin.topic_readers``); None without it (or ``java``
        False): the caller then reads every group. A failed listing raises
        ``KafkaUnavailable``; it is asked only once the JVM runs."""
        if not java:
            return None
        return self._from_java("topic readers", lambda reader: reader.topic_readers(self._list_group_ids(), counts))
