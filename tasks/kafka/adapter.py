"""The facade: ``KafkaAdapter`` is one object with every face of the
adapter, so callers keep one import and one constructor.

- ``snapshot``: what a poll reads (tasks/kafka/snapshot.py);
- ``describe_group``, ``committed_offsets``, ``alter_group_offsets``: what
  a reset reads and commits (tasks/kafka/groups.py);
- ``describe_topic``, ``create_topic``, ``partition_offsets``,
  ``offsets_for_times``, ``topic_compacted``, ``visible_runs``: topics, for
  resets and backfills (tasks/kafka/topics.py);
- ``read_records``, ``first_record``: records of a partition for the record
  viewer and a finding's urgency (tasks/kafka/record_reads.py);
- ``topic_partitions``, ``topic_configs``, ``topic_retention``: a topic as
  the broker holds it, for its page and a finding's urgency
  (tasks/kafka/topic_state.py);
- ``ping``, the lazy admin client and the error handling they share
  (tasks/kafka/client.py, tasks/kafka/errors.py).

These modules are the only control-plane code that imports confluent-kafka.
They turn the client's answers into plain data and raise one error type,
``KafkaUnavailable`` (of kind ``GroupNotEmpty`` or ``AccessRefused`` where
callers act differently). Creating an adapter opens no connection.
"""

from __future__ import annotations

from groups.domain.cluster_config import ClusterConfig
from tasks.kafka.client import TopicDetails
from tasks.kafka.errors import AccessRefused, GroupNotEmpty, KafkaUnavailable, missing_acl
from tasks.kafka.groups import GroupOperations, GroupStatus
from tasks.kafka.record_reads import RecordReads
from tasks.kafka.snapshot import SnapshotReads
from tasks.kafka.topic_state import TopicStateReads
from tasks.kafka.topics import TopicOperations

__all__ = [
    "AccessRefused", "ClusterConfig", "GroupNotEmpty", "GroupStatus", "KafkaAdapter", "KafkaUnavailable",
    "TopicDetails", "missing_acl",
]


class KafkaAdapter(SnapshotReads, GroupOperations, TopicStateReads, TopicOperations, RecordReads):
    """Reads (and, for resets and replay topics, writes) one cluster.
    ``KafkaAdapter(config, timeout=..., max_in_flight=...)``: every request
    carries ``timeout``; at most ``max_in_flight`` admin calls are outstanding."""

    def finalized_features(self) -> tuple[str, dict[str, int]]:
        """The cluster's ``metadata.version`` name and finalized feature
        levels, through Kafka's Java client (``JavaClient.finalized_features``)."""
        return self._java.finalized_features()
