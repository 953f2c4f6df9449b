"""The Kafka adapter, behind one facade (``tasks.kafka.adapter``): the only
control-plane code that imports confluent-kafka. Callers import from here."""

from tasks.kafka.adapter import (
    AccessRefused,
    ClusterConfig,
    GroupNotEmpty,
    GroupStatus,
    KafkaAdapter,
    KafkaUnavailable,
    TopicDetails,
)
from tasks.kafka.membership import Membership, SeatRequest

__all__ = ["AccessRefused", "ClusterConfig", "GroupNotEmpty", "GroupStatus", "KafkaAdapter", "KafkaUnavailable",
           "Membership", "SeatRequest", "TopicDetails"]
