"""Kafka brokers stopped and killed while Gapwatch polls: a failed poll changes
only the cluster's status, watermarks and findings stay exact, everything
recovers when the broker returns. The tests share the fault brokers
(tests/faults/conftest.py), each on topics and groups of its own."""

from __future__ import annotations

import threading

import pytest
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from django.db import connection

from groups.models import Cluster, Finding, PartitionGeneration
from tasks.celery_tasks import poll_cluster_task, poll_lock_key
from tasks.polling import poll_cluster
from tests.harness.clusters import QUIET, group_left_behind, group_reading, in_sync, leader_of, poll_ok
from tests.harness.kafka_clients import EXACTLY_ONCE_WRITES, Broker, wait_until

def open_findings(topic: str) -> dict[int, Finding]:
    return {f.partition: f for f in Finding.objects.filter(topic__name=topic, closed_at__isnull=True)}





@pytest.mark.django_db(transaction=True)
def test_a_broker_killed_during_polls_changes_only_the_cluster_status(kafka1, unique, settings):
    settings.KAFKA_TIMEOUT_SECONDS = 5  # the poll meeting the dead broker fails within it
    broker = Broker(kafka1.bootstrap)
    cluster = Cluster.objects.create(name=f"killed-{unique}", bootstrap_servers=kafka1.bootstrap)
    topic = f"orders-{unique}"
    broker.create_topic(topic, 2)
    consumer = group_reading(kafka1.bootstrap, cluster, topic, f"latest-{unique}",
                             lambda p, n: broker.produce(topic, p, n))
    broker.raise_partitions(topic, 4)
    for partition in (2, 3):
        broker.produce(topic, partition, 10)
    wait_until(lambda: poll_ok(cluster) and set(open_findings(topic)) == {2, 3}, what="findings on 2 and 3")
    before = {p: (f.id, f.state, f.high_watermark) for p, f in open_findings(topic).items()}
    generations = PartitionGeneration.objects.filter(topic__name=topic).count()

    # Polls run back to back while the broker is SIGKILLed under them.
    results, stop = [], threading.Event()

    def keep_polling():
        try:
            while not stop.is_set():
                results.append(poll_cluster(cluster_id=cluster.id))
        finally:
            connection.close()

    poller = threading.Thread(target=keep_polling)
    poller.start()
    try:
        wait_until(lambda: any(r.ok for r in results), timeout=60, interval=0.05, what="a poll under the poller")
        kafka1.stop_node(1, kill=True)
        wait_until(lambda: any(not r.ok for r in results), timeout=60, what="a poll to fail")
    finally:
        stop.set()
        poller.join(timeout=60)

    cluster.refresh_from_db()
    assert cluster.status == Cluster.Status.UNREACHABLE
    assert cluster.last_error
    assert cluster.poll_failures_total >= 1
    during = {p: (f.id, f.state, f.high_watermark) for p, f in open_findings(topic).items()}
    assert during == before, "a failed poll must not change, close or lose findings"
    assert PartitionGeneration.objects.filter(topic__name=topic).count() == generations
    assert not cluster.topics.get(name=topic).deleted

    kafka1.start_node(1)
    wait_until(lambda: poll_ok(cluster), timeout=90, interval=0.25, what="a poll to succeed again")
    cluster.refresh_from_db()
    assert cluster.status == Cluster.Status.OK and cluster.last_error == ""
    after = {p: (f.id, f.state, f.high_watermark) for p, f in open_findings(topic).items()}
    assert after == before
    assert PartitionGeneration.objects.filter(topic__name=topic).count() == generations
    consumer.close()


@pytest.mark.django_db(transaction=True)
def test_a_poll_slower_than_the_interval_never_runs_twice_at_once(kafka1, unique, celery_worker_thread, settings):
    """The broker frozen (SIGSTOP) makes a poll hang until its Kafka timeout;
    polls asked for meanwhile are skipped by the per-cluster lock.

    Each skipped poll first waits up to 2 * WATCH_INTERVAL_SECONDS + 1 s for
    the lock (a watcher tick holds it briefly), and the worker's second
    thread runs them one after another, so the frozen poll must outlast
    three such waits: its Kafka timeout is 15 s."""
    settings.KAFKA_TIMEOUT_SECONDS = 15
    lock_waits = 3 * (2 * settings.WATCH_INTERVAL_SECONDS + 1)
    assert settings.KAFKA_TIMEOUT_SECONDS > lock_waits + 3
    cluster = Cluster.objects.create(name=f"slow-{unique}", bootstrap_servers=kafka1.bootstrap)
    assert poll_cluster_task.delay(cluster.id).get(timeout=60)["ok"]
    cluster.refresh_from_db()
    polls_before = cluster.polls_total

    kafka1.pause_node(1)
    try:
        slow = poll_cluster_task.delay(cluster.id)
        locks = redis.Redis.from_url(settings.REDIS_URL)
        wait_until(lambda: locks.exists(poll_lock_key(cluster.id)), timeout=30,
                   what="the frozen poll to hold the cluster's lock")
        overlapping = [poll_cluster_task.delay(cluster.id) for _ in range(3)]
        answers = [result.get(timeout=60) for result in overlapping]
        slow_answer = slow.get(timeout=60)
    finally:
        kafka1.resume_node(1)

    assert all(answer.get("skipped") for answer in answers), answers
    assert slow_answer["ok"] is False and "skipped" not in slow_answer
    cluster.refresh_from_db()
    assert cluster.polls_total == polls_before + 1
    assert cluster.status == Cluster.Status.UNREACHABLE
    wait_until(lambda: poll_cluster_task.delay(cluster.id).get(timeout=60).get("ok"), timeout=60,
               what="polls to succeed after the broker resumes")


@pytest.mark.django_db(transaction=True)
def test_leaders_restarted_during_polls_keep_watermarks_and_findings_exact(kafka3, unique):
    """Three brokers, replication factor 3: the leader of a new partition is
    stopped and restarted twice; every successful poll stores exactly
    the number of messages produced, and the findings stay the same ones."""
    admin = AdminClient({"bootstrap.servers": kafka3.bootstrap, **QUIET})
    producer = Producer({"bootstrap.servers": kafka3.bootstrap, "linger.ms": 5, **EXACTLY_ONCE_WRITES, **QUIET})
    topic = f"replicated-{unique}"
    admin.create_topics([NewTopic(topic, 2, replication_factor=3, config={"min.insync.replicas": "2"})])[
        topic].result(timeout=60)
    wait_until(lambda: in_sync(admin, topic, 3), timeout=60, what="the topic in sync")
    produced = {0: 0, 1: 0, 2: 0, 3: 0}

    def produce(partition: int, count: int) -> None:
        for number in range(count):
            producer.produce(topic, value=f"m-{number}", partition=partition)
        assert producer.flush(60) == 0
        produced[partition] += count

    cluster = Cluster.objects.create(name=f"three-{unique}", bootstrap_servers=kafka3.bootstrap)
    consumer = group_reading(kafka3.bootstrap, cluster, topic, f"latest-{unique}", produce)
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=60)
    wait_until(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions) == 4,
               what="the producer to see 4 partitions")
    wait_until(lambda: in_sync(admin, topic, 3), timeout=60, what="new partitions in sync")
    produce(2, 10)
    produce(3, 10)
    wait_until(lambda: poll_ok(cluster) and set(open_findings(topic)) == {2, 3}, what="findings on 2 and 3")
    ids = {p: f.id for p, f in open_findings(topic).items()}

    def exact_poll() -> bool:
        if not poll_ok(cluster):
            return False
        rows = open_findings(topic)
        assert {p: f.id for p, f in rows.items()} == ids, "findings were closed or replaced"
        assert {p: rows[p].high_watermark for p in (2, 3)} == {2: produced[2], 3: produced[3]}
        return True

    for _ in range(2):
        leader = leader_of(admin, topic, 2)
        kafka3.stop_node(leader)
        produce(2, 7)  # two of three replicas are enough for acks=all with min.insync.replicas=2
        produce(3, 7)
        wait_until(exact_poll, timeout=90, interval=0.25, what="an exact poll with the leader stopped")
        kafka3.start_node(leader)
        wait_until(lambda: in_sync(admin, topic, 3), timeout=90, what="the restarted broker back in sync")
        produce(2, 3)
        wait_until(exact_poll, timeout=90, interval=0.25, what="an exact poll after the restart")

    assert PartitionGeneration.objects.filter(topic__name=topic).count() == 2
    assert all(f.state == "pending" for f in open_findings(topic).values())
    consumer.close()


@pytest.mark.django_db(transaction=True)
def test_a_reset_meeting_a_dead_broker_waits_and_completes_exactly_when_it_returns(
    kafka1, unique, celery_worker_thread, settings
):
    """The broker SIGKILLed before the approved reset runs: the job waits (never
    `succeeded`), and the first successful poll after the broker's return runs
    it to an exact, read-back result. This also caught librdkafka aborting the
    worker process when a group request outlived a dead broker (see
    tasks/offset_reset.py)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    from groups.models import RemediationJob
    from groups.services.remediation import job_request
    from tests.factories import user_with_role

    broker = Broker(kafka1.bootstrap)
    cluster = Cluster.objects.create(name=f"reset-{unique}", bootstrap_servers=kafka1.bootstrap)
    topic, group_id = f"orders-{unique}", f"latest-{unique}"
    group_left_behind(broker, cluster, topic, group_id, missed=12)
    wait_until(lambda: poll_ok(cluster) and 2 in open_findings(topic)
               and cluster.groups.get(group_id=group_id).state == "Empty", what="an Empty group with a finding")

    settings.KAFKA_TIMEOUT_SECONDS = 5  # the reset meeting the dead broker gives up within it
    kafka1.stop_node(1, kill=True)
    job = job_request(user=user_with_role("approver", "approver"), finding_ids=[open_findings(topic)[2].id],
                      kind="reset", params={"target": "earliest"})
    wait_until(lambda: RemediationJob.objects.get(id=job.id).status == "waiting", timeout=60,
               what="the job to wait for the broker")
    job.refresh_from_db()
    assert job.status == "waiting" and job.finished_at is None
    assert "retried after the next successful poll" in job.status_reason

    kafka1.start_node(1)
    wait_until(lambda: poll_cluster_task.delay(cluster.id).get(timeout=60).get("ok"), timeout=90, interval=0.25,
               what="a successful poll")
    wait_until(lambda: RemediationJob.objects.get(id=job.id).status == "succeeded", timeout=60,
               what="the job to succeed after the broker returned")
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, 2)])
    admin = AdminClient({"bootstrap.servers": kafka1.bootstrap, **QUIET})
    answer = admin.list_consumer_group_offsets([request])[group_id].result(timeout=30)
    assert [tp.offset for tp in answer.topic_partitions] == [0], "partition 2 reset to its log start"


def test_a_fault_cluster_rested_after_its_unit_starts_again_with_its_records(kafka1, unique):
    """The fault tests' clusters stop when their unit of work ends on a
    worker (tests/faults/conftest.py) and start again, records kept, for a
    later test that asks for one."""
    broker = Broker(kafka1.bootstrap)
    topic = f"rested-{unique}"
    consumer = None
    try:
        broker.create_topic(topic, 1)
        broker.produce(topic, 0, 3)
        kafka1.rest()
        assert kafka1.processes == {}, "a node still runs"
        consumer = Consumer({"bootstrap.servers": kafka1.heal().bootstrap, "group.id": f"rested-{unique}",
                             "enable.auto.commit": False})
        # Its partition is served again once the node leads it: a moment after it registered.
        wait_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5) == (0, 3),
                   timeout=60, what="the rested node's records served again", retry_on=(Exception,))
    finally:
        if consumer is not None:
            consumer.close()
        broker.close()
