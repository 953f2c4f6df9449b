"""The facade: ``KafkaAdapter`` is one object with every face of the
adapter, so callers keep one import and one constructor.

- ``snapshot``: what a poll reads (adapters/kafka/snapshot.py);
- ``describe_group``, ``committed_offsets``, ``alter_group_offsets``: what
  a reset reads and commits (adapters/kafka/groups.py);
- ``describe_topic``, ``create_topic``, ``partition_offsets``,
  ``offsets_for_times``, ``topic_compacted``, ``visible_runs``: topics, for
  resets and backfills (adapters/kafka/topics.py);
- ``read_records``, ``first_record``: records of a partition for the record
  viewer and a finding's urgency (adapters/kafka/record_reads.py);
- ``topic_partitions``, ``topic_configs``, ``topic_retention``: a topic as
  the broker holds it, for its page and a finding's urgency
  (adapters/kafka/topic_state.py);
- ``ping``, the lazy admin client and the error handling they share
  (adapters/kafka/client.py, adapters/kafka/errors.py).

These modules are the only control-plane code that imports confluent-kafka.
They turn the client's answers into plain data and raise one error type,
``KafkaUnavailable`` (of kind ``GroupNotEmpty`` or ``AccessRefused`` where
callers act differently). Creating an adapter opens no connection.
"""

from __future__ import annotations

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka.client import TopicDetails
from adapters.kafka.errors import AccessRefused, GroupNotEmpty, KafkaUnavailable, missing_acl
from adapters.kafka.groups import GroupOperations, GroupStatus
from adapters.kafka.record_reads import RecordReads
from adapters.kafka.snapshot import SnapshotReads
from adapters.kafka.topic_state import TopicStateReads
from adapters.kafka.topics import TopicOperations

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
