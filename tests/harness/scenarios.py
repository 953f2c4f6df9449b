"""Scenarios on the real broker that several test modules share: a group
reading a topic, the gap it misses when partitions are added, and what the
broker says the group committed. Not a test module: tests import it."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from groups.models import Finding, RemediationJob
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import GroupConsumer, wait_until

K = 25  # messages produced to each new partition before the group picks it up


# A poll the broker did not answer in time (KAFKA_TIMEOUT_SECONDS) is followed by the next one, as beat's
# schedule follows it: on a host at half its speed, under the suite's load, the single local broker twice
# took longer than that to answer one share group's start offsets. At most POLL_TRIES polls; any other
# failure fails at once.
POLL_TRIES = 3


def poll(cluster):
    for _ in range(POLL_TRIES):
        summary = poll_cluster(cluster_id=cluster.id)
        if summary.ok or "no answer within" not in (summary.error or ""):
            break
    assert summary.ok, summary.error
    return summary


def findings(topic: str, group_id: str) -> dict[int, Finding]:
    rows = Finding.objects.filter(topic__name=topic, group__group_id=group_id, closed_at__isnull=True)
    return {row.partition: row for row in rows}


def start_consuming_group(broker, cluster, topic, group_id, *, offset_reset, **kwargs) -> GroupConsumer:
    """A group that consumed and committed on the topic's first 2 partitions,
    and that a poll has seen reading the topic."""
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset=offset_reset, **kwargs)
    wait_until(lambda: consumer.assigned == {0, 1}, what=f"{group_id} assigned 0 and 1")

    # A `latest` consumer only reads what is produced after it fetched its
    # start position: keep producing until it has read from both partitions.
    def consumed_both() -> bool:
        broker.produce(topic, 0, 1)
        broker.produce(topic, 1, 1)
        return consumer.count(0) > 0 and consumer.count(1) > 0

    wait_until(consumed_both, interval=0.5, what=f"{group_id} to consume")
    wait_until(
        lambda: poll(cluster) and cluster.groups.filter(group_id=group_id, group_topics__topic__name=topic).exists(),
        interval=0.5, what=f"a poll to see {group_id} reading {topic}",
    )
    return consumer


def produce_one_each(broker, topic: str, partitions: list[int]) -> bool:
    for partition in partitions:
        broker.produce(topic, partition, 1, prefix="tick")
    return True


def gap_scenario(broker, cluster, topic: str, group_id: str) -> None:
    """A latest group misses K messages on new partition 2 (DESIGN section 1),
    its policy declared as its operator would: K is then definitely missed."""
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    cluster.groups.filter(group_id=group_id).update(declared_policy="latest")
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    consumer.close()
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: consumer.assigned == {0, 1, 2}, what="new partition assigned")
        wait_until(lambda: produce_one_each(broker, topic, [2]) and consumer.count(2), interval=0.5,
                   what="the group reading partition 2")
        wait_until(lambda: poll(cluster) and findings(topic, group_id)[2].state == "gap", interval=0.5,
                   what="the finding to turn gap")
    finally:
        consumer.close()


def committed(broker, group_id: str, topic: str, partitions=(0, 1, 2)) -> dict[int, int | None]:
    """Read straight from the broker with the raw client, not the adapter under test."""
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p) for p in partitions])
    answer = broker.admin.list_consumer_group_offsets([request])[group_id].result(timeout=30)
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in answer.topic_partitions}


def job_of(job_id: int) -> RemediationJob:
    """The job as stored now."""
    return RemediationJob.objects.get(id=job_id)
