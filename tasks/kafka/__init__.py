"""The Kafka adapter: the only control-plane code that imports confluent-kafka.

Callers import from here: ``KafkaAdapter`` (one object, several faces),
``KafkaUnavailable`` and ``GroupNotEmpty`` (the errors), and the plain data
it answers with.
"""

from groups.domain.cluster_config import ClusterConfig
from tasks.kafka.adapter import GroupNotEmpty, GroupStatus, KafkaAdapter, KafkaUnavailable, TopicDetails

__all__ = ["ClusterConfig", "GroupNotEmpty", "GroupStatus", "KafkaAdapter", "KafkaUnavailable", "TopicDetails"]
