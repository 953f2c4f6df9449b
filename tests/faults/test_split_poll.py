"""A split poll (tasks.poll_parts) on a three-broker cluster, with real Celery
workers taking its parts: it stores what an unsplit poll stores, in one write;
a part whose worker is killed mid-read is read again by the poll's worker; and
the poll's own worker killed in the middle of its write leaves nothing written.

The moments are made with PostgreSQL locks, not clocks: a part's worker reads
the cluster's row before it reads Kafka (a locked table holds it there, its
part claimed and unanswered), and the poll's write touches every group's row
(a locked group row holds it there, topics already written in its transaction)."""

from __future__ import annotations

import os
import signal

import psycopg
import pytest
import redis
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from controlplane.celery import app
from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, PartitionGeneration, Topic
from tasks.celery_tasks import poll_cluster_task, poll_lock_key
from tasks.cluster_client import kafka_client
from tasks.polling import poll_cluster
from tasks.poll_parts import CeleryParts
from tests.harness.clusters import QUIET
from tests.harness.workers import start_celery, stop_celery, worker_env
from tests.harness.kafka_clients import Broker, GroupConsumer, wait_until

pytestmark = [pytest.mark.timeout(600), pytest.mark.django_db(transaction=True)]

PARTS = 3
FINDING_FIELDS = ("group__group_id", "topic__name", "partition", "generation__number", "state", "first_log_start",
                  "log_start_offset", "high_watermark", "committed_offset", "lag", "pre_pickup_high_watermark",
                  "first_commit", "missed_definite", "missed_possible", "backfill_start", "backfill_end",
                  "closed_reason")


def stored(cluster: Cluster) -> dict:
    """What polls stored about ``cluster``, without ids and times."""
    return {
        "topics": sorted(Topic.objects.filter(cluster=cluster).values_list(
            "name", "kafka_topic_id", "partition_count", "deleted")),
        "generations": sorted(PartitionGeneration.objects.filter(topic__cluster=cluster).values_list(
            "topic__name", "number", "partitions", "added_partitions")),
        "groups": sorted(ConsumerGroup.objects.filter(cluster=cluster).values_list(
            "group_id", "state", "type", "member_count", "declared_policy", "present")),
        "group_topics": sorted((row.group.group_id, row.topic.name, row.lag, repr(row.partitions))
                               for row in GroupTopic.objects.filter(group__cluster=cluster)
                               .select_related("group", "topic")),
        "findings": sorted(Finding.objects.filter(cluster=cluster).values_list(*FINDING_FIELDS)),
    }


def same_reading(ours, theirs) -> bool:
    """Two snapshots read the same topics (internal ones aside: the brokers write to those on their own) and
    groups."""
    def user_topics(snapshot):
        return [topic for topic in snapshot.topics if not topic.is_internal]

    assert user_topics(ours) == user_topics(theirs)
    assert ours.groups == theirs.groups
    return True


def populate(bootstrap: str, unique: str) -> list[str]:
    """Four topics of 30 partitions with a record on each, and nine groups
    committed on all of them; the group ids."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    names = [f"split-{unique}-{n}" for n in range(4)]
    for future in admin.create_topics([NewTopic(name, 30, replication_factor=1) for name in names]).values():
        future.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for name in names:
        for partition in range(30):
            producer.produce(name, value=b"x", partition=partition)
    assert producer.flush(60) == 0
    groups = [f"split-g{n}-{unique}" for n in range(9)]

    def committed(group_id: str) -> bool:
        # Errors come per partition, not raised (NOT_COORDINATOR while a new cluster's
        # __consumer_offsets is still being made): asked again until none.
        answer = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(name, partition, 1) for name in names for partition in range(30)])]
        )[group_id].result(timeout=60)
        return all(partition.error is None for partition in answer.topic_partitions)

    for group_id in groups:
        wait_until(lambda group_id=group_id: committed(group_id), interval=0.5, what=f"{group_id}'s commit")
    return groups


@pytest.fixture
def part_workers(tmp_path):
    """Start Celery workers (threads, one task at a time) that take split polls' parts; stopped at the end."""
    processes = []
    log = open(tmp_path / "workers.log", "ab")  # noqa: SIM115 - shared by the processes below

    def start(name: str, queues: str = "celery,watch", **env: str):
        process = start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"{name}@%h",
                                "-Q", queues], worker_env(**env), log)
        processes.append(process)
        wait_until(lambda: any(f"{name}@" in host for reply in app.control.ping(timeout=1) for host in reply),
                   timeout=120, what=f"Celery worker {name} to answer")
        return process

    yield start
    for process in processes:
        stop_celery(process)
    log.close()


def _database():
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], password=db["PASSWORD"],
                           dbname=db["NAME"], autocommit=False)


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("select count(*) from pg_stat_activity where datname = current_database()"
                       " and wait_event_type = 'Lock'")
        return cursor.fetchone()[0] > 0


def test_a_split_poll_stores_what_an_unsplit_poll_stores_with_parts_read_by_other_workers(
    kafka3, unique, settings, part_workers
):
    """Two clusters on the same three brokers, one polled whole and one in
    parts, through the same history: a `latest` group reads a topic, leaves,
    and the topic gets a partition and records; both store the same topics,
    generations, groups and findings, and each poll is one write."""
    populate(kafka3.bootstrap, unique)
    part_workers("parts-1")
    part_workers("parts-2")
    whole = Cluster.objects.create(name=f"whole-{unique}", bootstrap_servers=kafka3.bootstrap)
    split = Cluster.objects.create(name=f"split-{unique}", bootstrap_servers=kafka3.bootstrap)
    settings.POLL_PARTS = PARTS

    def poll(cluster: Cluster) -> dict:
        settings.POLL_SPLIT_PARTITIONS = 1 if cluster == split else 0
        before = Cluster.objects.get(id=cluster.id).polls_total
        summary = poll_cluster(cluster_id=cluster.id)
        assert summary.ok, summary.error
        assert Cluster.objects.get(id=cluster.id).polls_total == before + 1  # one poll, one write
        return summary.parts

    # The first poll of a cluster knows no partitions yet: it is read whole.
    assert (poll(whole), poll(split)) == ({}, {})
    broker = Broker(kafka3.bootstrap)
    topic, group_id = f"split-late-{unique}", f"split-latest-{unique}"
    broker.create_topic(topic, 2)
    consumer = GroupConsumer(kafka3.bootstrap, group_id, topic, offset_reset="latest")
    wait_until(lambda: consumer.assigned == {0, 1}, what="the group to own partitions 0 and 1")
    wait_until(lambda: broker.produce(topic, 0, 1) or broker.produce(topic, 1, 1)
               or (consumer.count(0) > 0 and consumer.count(1) > 0), interval=0.5, what="the group to consume")
    wait_until(lambda: poll(whole) == {} and poll(split)["count"] == PARTS
               and all(ConsumerGroup.objects.filter(cluster=c, group_id=group_id).exists() for c in (whole, split)),
               interval=0.5, what="both clusters' polls to see the group")
    consumer.close()
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, 25)

    # Polled until one split poll had parts read by the other workers (they may be slower than the poll's own).
    parts = wait_until(lambda: poll(whole) == {} and (read := poll(split))["read_elsewhere"] > 0 and read,
                       interval=0.2, what="a split poll with parts read by other workers")
    assert parts["read_elsewhere"] + parts["read_here"] == 2 * PARTS  # watermarks and groups, in parts each
    poll(whole)
    ours, theirs = stored(split), stored(whole)
    assert ours == theirs
    assert {row[1:3] for row in ours["findings"]} == {(topic, 2)}
    assert len(ours["topics"]) >= 5 and len(ours["groups"]) >= 10


def test_a_part_whose_worker_is_killed_mid_read_is_read_again_by_the_polls_worker(kafka3, unique, settings,
                                                                              part_workers):
    """The worker takes a part and is held before it reads Kafka (the cluster
    table locked), then SIGKILLed: the poll waits for it at most its part
    wait, reads the part itself, and its snapshot is the unsplit one."""
    populate(kafka3.bootstrap, unique)
    worker = part_workers("parts-held")
    cluster = Cluster.objects.create(name=f"held-{unique}", bootstrap_servers=kafka3.bootstrap)
    adapter = kafka_client(cluster.cluster_config())
    parts = None
    held = _database()
    try:
        held.execute("lock table groups_cluster in access exclusive mode")

        def split_snapshot():
            nonlocal parts
            parts = CeleryParts(cluster_id=cluster.id, adapter=adapter, part_wait=3.0)
            taken = adapter.snapshot(cluster=cluster.name, now=timezone.now(), parts=parts, part_count=PARTS)
            return parts.retaken and taken

        # Until the worker has taken a part before the poll's worker did (it is held on the first it takes).
        snapshot = wait_until(split_snapshot, what="the worker to take a part")
        # It took one part and was held; every part, that one too, was read here.
        assert (parts.retaken, parts.answered_elsewhere, parts.read_here) == (1, 0, 2 * PARTS)
        assert _waiting_on_a_lock()
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        held.rollback()
        held.close()
    assert same_reading(snapshot, adapter.snapshot(cluster=cluster.name, now=timezone.now()))
    assert sum(len(t.partitions) for t in snapshot.topics if t.name.startswith(f"split-{unique}")) == 120


def test_the_polls_worker_killed_in_the_middle_of_its_write_leaves_nothing_written(kafka3, unique, part_workers):
    """A worker runs a split poll of a cluster with a new topic and a new
    partition to record; the other takes parts. The poll's write is held
    on a group's row (after it wrote topics and generations in its
    transaction) and the worker is SIGKILLed there: nothing of the poll is
    stored, its lock expires, and the next poll stores it all."""
    groups = populate(kafka3.bootstrap, unique)
    cluster = Cluster.objects.create(name=f"killed-{unique}", bootstrap_servers=kafka3.bootstrap)
    assert poll_cluster(cluster_id=cluster.id).ok
    before = stored(cluster)
    polled = Cluster.objects.values_list("polls_total", "last_poll_at").get(id=cluster.id)
    broker = Broker(kafka3.bootstrap)
    broker.create_topic(f"split-new-{unique}", 4)
    broker.raise_partitions(f"split-{unique}-0", 31)

    part_workers("parts-free")
    lock_seconds = 10
    # The poll goes to a queue of the poller's own; parts go to the queue watch, which both take.
    poller = part_workers("poller", queues=f"celery,watch,poll-{unique}", POLL_SPLIT_PARTITIONS="1", POLL_PARTS=str(PARTS),
                          POLL_LOCK_SECONDS=str(lock_seconds))
    held = _database()
    try:
        held.execute("select 1 from groups_consumergroup where cluster_id = %s and group_id = %s for update",
                     (cluster.id, groups[0]))
        poll_cluster_task.apply_async((cluster.id,), queue=f"poll-{unique}")
        wait_until(_waiting_on_a_lock, interval=0.05, what="the poll's write to wait on the group's row")
        os.killpg(poller.pid, signal.SIGKILL)
        poller.wait(timeout=30)
    finally:
        held.rollback()
        held.close()
    assert stored(cluster) == before
    assert Cluster.objects.values_list("polls_total", "last_poll_at").get(id=cluster.id) == polled

    client = redis.Redis.from_url(django_settings.REDIS_URL)
    wait_until(lambda: not client.exists(poll_lock_key(cluster.id)), timeout=3 * lock_seconds,
               what="the killed worker's poll lock to expire")
    assert poll_cluster(cluster_id=cluster.id).ok
    after = stored(cluster)
    assert f"split-new-{unique}" in {row[0] for row in after["topics"]}
    assert (f"split-{unique}-0", 2, list(range(31)), [30]) in after["generations"]


def test_no_worker_but_the_polls_reads_every_part_itself(kafka3, unique, settings):
    """With no other worker running, a split poll never waits on the queue: the
    poll's worker claims and reads every part (their tasks, taken later, find
    them claimed)."""
    populate(kafka3.bootstrap, unique)
    cluster = Cluster.objects.create(name=f"alone-{unique}", bootstrap_servers=kafka3.bootstrap)
    adapter = kafka_client(cluster.cluster_config())
    parts = CeleryParts(cluster_id=cluster.id, adapter=adapter)
    snapshot = adapter.snapshot(cluster=cluster.name, now=timezone.now(), parts=parts, part_count=PARTS)
    assert (parts.read_here, parts.answered_elsewhere, parts.retaken) == (2 * PARTS, 0, 0)
    assert same_reading(snapshot, adapter.snapshot(cluster=cluster.name, now=timezone.now()))
