"""The Kafka adapter, behind one facade (``adapters.kafka.adapter``): the only
control-plane code that imports confluent-kafka. Callers import from here."""

from adapters.kafka.adapter import (
    AccessRefused,
    ClusterConfig,
    GroupNotEmpty,
    GroupStatus,
    KafkaAdapter,
    KafkaUnavailable,
    TopicDetails,
)
from adapters.kafka.membership import Membership, SeatCommit, SeatRequest

__all__ = ["AccessRefused", "ClusterConfig", "GroupNotEmpty", "GroupStatus", "KafkaAdapter", "KafkaUnavailable",
           "Membership", "SeatCommit", "SeatRequest", "TopicDetails"]
