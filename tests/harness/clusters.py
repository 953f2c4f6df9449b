"""What the Kafka fault tests share: quiet clients, where a partition's
leader is, whether a topic is in sync, and `latest` groups a poll has seen."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from groups.models import Cluster
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import Broker, GroupConsumer, wait_until

QUIET = {"log_level": 0}  # the clients' own logs of a dead broker would drown the test output


def poll_ok(cluster: Cluster):
    summary = poll_cluster(cluster_id=cluster.id)
    return summary if summary.ok else None


def group_reading(bootstrap: str, cluster: Cluster, topic: str, group_id: str, produce) -> GroupConsumer:
    """A `latest` group that consumed partitions 0 and 1 of ``topic`` and that a poll has seen."""
    consumer = GroupConsumer(bootstrap, group_id, topic, offset_reset="latest")
    wait_until(lambda: consumer.assigned == {0, 1}, what="the group to own partitions 0 and 1")

    def consumed_both() -> bool:
        produce(0, 1)
        produce(1, 1)
        return consumer.count(0) > 0 and consumer.count(1) > 0

    wait_until(consumed_both, interval=0.5, what="the group to consume")
    wait_until(lambda: poll_ok(cluster) and cluster.groups.filter(group_id=group_id).exists(),
               interval=0.5, what="a poll to see the group")
    return consumer


def group_left_behind(broker: Broker, cluster: Cluster, topic: str, group_id: str, *, missed: int) -> None:
    """A `latest` group that read partitions 0 and 1 of a new ``topic`` and
    left it (Empty: a reset may commit) once partition 2 was added and got
    ``missed`` messages."""
    broker.create_topic(topic, 2)
    consumer = group_reading(broker.bootstrap, cluster, topic, group_id, lambda p, n: broker.produce(topic, p, n))
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, missed)
    consumer.close()


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def in_sync(admin: AdminClient, topic: str, replicas: int) -> bool:
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    return all(len(p.isrs) == replicas and p.leader >= 0 for p in partitions)
