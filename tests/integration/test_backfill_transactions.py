"""Backfills of ranges that hold transactions, against the real broker, real
Spark (local[2], on the session's Connect server) and the real database: a
backfill delivers what the group would have read (issue 32, item 3).

A topic is raised from 2 to 4 partitions and a transactional producer
(confluent_kafka, ``transactional.id``) writes to partition 2 before the
group picks it up: ``COMMITTED`` committed records, an aborted transaction of
``ABORTED``, ``COMMITTED`` committed again. Each transaction ends with a
marker, which takes an offset: 10 + marker + 5 + marker + 10 + marker = 28
offsets, 20 committed records, 25 records a read_uncommitted reader reads.
The finding says [0, 28) was missed, as the poller would leave it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition

from groups.models import Cluster, ConsumerGroup, Finding, PartitionGeneration, RemediationJob, Topic
from groups.services.previews import backfill_preview, reset_preview
from groups.services.remediation import job_request
from tests.harness.backfills import JobThread, parquet_rows, replayed_rows, run_job
from tests.harness.kafka_clients import wait_until

PARTITION = 2
COMMITTED = 10
ABORTED = 5


def transactional_producer(broker, topic: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60_000})
    wait_until(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions) == 4,
               what=f"the producer to see 4 partitions of {topic}")
    producer.init_transactions(30)
    return producer


def write_transaction(producer: Producer, topic: str, kind: str, count: int, *, end: str | None) -> None:
    """``count`` records ``<kind>-<n>`` in one transaction; ``end``: commit, abort, or None (left open)."""
    producer.begin_transaction()
    for number in range(count):
        producer.produce(topic, partition=PARTITION, key=f"{kind}-{number}".encode(),
                         value=f"{kind}-{number}".encode())
    assert producer.flush(30) == 0
    if end == "commit":
        producer.commit_transaction(30)
    elif end == "abort":
        producer.abort_transaction(30)


def high_watermark(broker, topic: str) -> int:
    """Partition 2's high watermark, asked by a fresh client (the harness's
    admin client may not know the new partition's leader yet); read_uncommitted,
    or librdkafka answers the last stable offset."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"watermarks-{topic}",
                         "isolation.level": "read_uncommitted"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, PARTITION), timeout=10)[1]
    finally:
        consumer.close()


def missed_finding(broker, *, name: str, topic: str, end: int, sink: str,
                   isolation: str = ConsumerGroup.Isolation.UNKNOWN) -> Finding:
    """A gap finding on partition 2 of ``topic`` for [0, end), as the poller leaves it."""
    topic_id = str(broker.admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id)
    now = datetime.now(UTC)
    cluster = Cluster.objects.create(name=name, bootstrap_servers=broker.bootstrap)
    topic_row = Topic.objects.create(cluster=cluster, name=topic, kafka_topic_id=topic_id, partition_count=4,
                                     first_seen_at=now, updated_at=now)
    PartitionGeneration.objects.create(topic=topic_row, number=1, kafka_topic_id=topic_id, partitions=[0, 1],
                                       observed_at=now)
    generation = PartitionGeneration.objects.create(topic=topic_row, number=2, kafka_topic_id=topic_id,
                                                    partitions=[0, 1, 2, 3], added_partitions=[2, 3], observed_at=now)
    group = ConsumerGroup.objects.create(cluster=cluster, group_id=f"{topic}-latest", state="Stable", member_count=1,
                                         backfill_sink=sink, declared_isolation=isolation, first_seen_at=now,
                                         last_seen_at=now)
    return Finding.objects.create(
        cluster=cluster, group=group, topic=topic_row, partition=PARTITION, generation=generation,
        state=Finding.State.GAP, created_at=now, updated_at=now, first_log_start=0, log_start_offset=0,
        high_watermark=end, committed_offset=end, lag=0, pre_pickup_high_watermark=end, first_commit=end,
        missed_definite=end, missed_possible=0, backfill_start=0, backfill_end=end, policy_source="assumed")


def aborted_inside(broker, topic: str, transactional_id: str) -> int:
    """Committed, aborted, committed on partition 2 of a new topic; its high watermark."""
    broker.create_topic(topic, 2)
    broker.raise_partitions(topic, 4)
    producer = transactional_producer(broker, topic, transactional_id)
    write_transaction(producer, topic, "committed-a", COMMITTED, end="commit")
    write_transaction(producer, topic, "aborted", ABORTED, end="abort")
    write_transaction(producer, topic, "committed-b", COMMITTED, end="commit")
    # The coordinator writes the markers after the commit returns: wait for the last.
    return wait_until(lambda: high_watermark(broker, topic) == 2 * COMMITTED + ABORTED + 3 and high_watermark(
        broker, topic), what="three transactions and their three markers")


def committed_values() -> list[bytes]:
    return sorted(f"{kind}-{n}".encode() for kind in ("committed-a", "committed-b") for n in range(COMMITTED))


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sink", ["parquet", "kafka"])
def test_an_aborted_transaction_in_the_missed_range_is_not_delivered_and_the_records_are_verified(
    broker, unique, approver, backfill_on_server, enqueued, sink
):
    topic = f"txn-{unique}"
    end = aborted_inside(broker, topic, f"tx-{unique}")
    finding = missed_finding(broker, name=f"txn-{unique}", topic=topic, end=end, sink=sink)
    if sink == "kafka":
        broker.topics.append(f"{topic}.replay")
    job = run_job(job_request(user=approver, finding_ids=[finding.id], kind="backfill", params={"sink": sink}).id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error, job.result)
    (partition,) = job.result["partitions"]
    assert (partition["offsets"], partition["expected"], partition["delivered"], partition["unexplained"]) \
        == (end, 2 * COMMITTED, 2 * COMMITTED, 0), "20 records in 28 offsets, all 20 delivered, nothing else"
    assert partition["explained"] == {"aborted_transaction": ABORTED, "transaction_markers": 3}
    assert (job.result["isolation"], job.result["expected"], job.result["offsets"]) == ("read_committed", 20, end)
    assert job.status_reason.startswith(f"delivered 20 of 20 records ({end} offsets)")
    if sink == "parquet":
        values = sorted(row[4] for row in parquet_rows(job.result["sink"]["output"]))
    else:
        values = sorted(row[4] for row in replayed_rows(broker, topic, f"{topic}.replay"))
    assert values == committed_values(), "exactly the committed records: no aborted one"


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_group_declared_read_uncommitted_gets_the_aborted_records_it_would_have_read(
    broker, unique, approver, backfill_on_server, enqueued
):
    topic = f"txn-{unique}"
    end = aborted_inside(broker, topic, f"tx-{unique}")
    finding = missed_finding(broker, name=f"txn-{unique}", topic=topic, end=end, sink="parquet",
                             isolation=ConsumerGroup.Isolation.READ_UNCOMMITTED)
    job = run_job(job_request(user=approver, finding_ids=[finding.id], kind="backfill", params={}).id)

    assert job.params == {"sink": "parquet", "isolation": "read_uncommitted"}, "decided at approval, like the sink"
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error, job.result)
    (partition,) = job.result["partitions"]
    assert (partition["expected"], partition["delivered"], partition["explained"]) \
        == (2 * COMMITTED + ABORTED, 2 * COMMITTED + ABORTED, {"transaction_markers": 3})
    values = sorted(row[4] for row in parquet_rows(job.result["sink"]["output"]))
    assert values == sorted(committed_values() + [f"aborted-{n}".encode() for n in range(ABORTED)])


def open_inside(broker, topic: str, transactional_id: str) -> tuple[Producer, int]:
    """Committed records, then a transaction left open across the range's end."""
    broker.create_topic(topic, 2)
    broker.raise_partitions(topic, 4)
    producer = transactional_producer(broker, topic, transactional_id)
    write_transaction(producer, topic, "committed-a", COMMITTED, end="commit")
    write_transaction(producer, topic, "open", ABORTED, end=None)
    end = wait_until(lambda: high_watermark(broker, topic) == COMMITTED + 1 + ABORTED and high_watermark(
        broker, topic), what="a committed transaction, its marker and the open one")
    return producer, end


def held_reason(job_id: int) -> str:
    job = RemediationJob.objects.get(id=job_id)
    return job.status_reason if "waiting for an open transaction" in job.status_reason else ""


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_range_an_open_transaction_holds_waits_for_it_says_why_and_completes_after_the_commit(
    broker, unique, approver, backfill_on_server, enqueued
):
    topic = f"txn-{unique}"
    producer, end = open_inside(broker, topic, f"tx-{unique}")
    finding = missed_finding(broker, name=f"txn-{unique}", topic=topic, end=end, sink="parquet")
    job = job_request(user=approver, finding_ids=[finding.id], kind="backfill", params={"sink": "parquet"})
    thread = JobThread(job.id)
    try:
        reason = wait_until(lambda: held_reason(job.id), timeout=60, what="the job to say what it waits for")
        assert f"{topic}[{PARTITION}]: the range [0, {end}) ends past the last stable offset {COMMITTED + 1}" \
            in reason, reason
        assert f"transactional.id 'tx-{unique}'" in reason and "of its transaction.timeout.ms 60 s" in reason, reason
        assert RemediationJob.objects.get(id=job.id).result.get("attempts", []) == [], "no Spark job while it waits"
        producer.commit_transaction(30)
    finally:
        thread.join()
    assert thread.failures == []

    job.refresh_from_db()
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error, job.result)
    (partition,) = job.result["partitions"]
    assert (partition["expected"], partition["delivered"], partition["explained"]) \
        == (COMMITTED + ABORTED, COMMITTED + ABORTED, {"transaction_markers": 1})
    assert job.result["transaction_wait"]["seconds"] > 0
    values = sorted(row[4] for row in parquet_rows(job.result["sink"]["output"]))
    assert values == sorted([f"committed-a-{n}".encode() for n in range(COMMITTED)]
                            + [f"open-{n}".encode() for n in range(ABORTED)])


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_transaction_left_open_past_the_bound_fails_the_job_naming_it(
    broker, unique, approver, backfill_on_server, enqueued
):
    backfill_on_server.BACKFILL_TRANSACTION_WAIT_SECONDS = 3
    topic = f"txn-{unique}"
    producer, end = open_inside(broker, topic, f"tx-{unique}")
    try:
        finding = missed_finding(broker, name=f"txn-{unique}", topic=topic, end=end, sink="parquet")
        job = run_job(job_request(user=approver, finding_ids=[finding.id], kind="backfill",
                                  params={"sink": "parquet"}).id)
    finally:
        producer.abort_transaction(30)

    assert job.status == RemediationJob.Status.FAILED
    assert re.match(r"waited \d+ s for open transactions, nothing was read: ", job.status_reason), job.status_reason
    assert f"{topic}[{PARTITION}]" in job.status_reason and f"'tx-{unique}'" in job.status_reason
    assert "its coordinator aborts it in" in job.status_reason, job.status_reason
    assert job.result["attempts"] == [], "Spark never started"


@pytest.mark.django_db(transaction=True)
def test_the_previews_say_which_records_a_backfill_delivers_and_that_a_reset_needs_no_change(broker, unique):
    topic = f"txn-{unique}"
    broker.create_topic(topic, 2)
    broker.raise_partitions(topic, 4)
    undeclared = missed_finding(broker, name=f"txn-{unique}", topic=topic, end=28, sink="parquet")
    preview = backfill_preview(finding_ids=[undeclared.id])
    assert (preview["isolation"], preview["params"]) == ("read_committed", {"sink": "parquet"})
    assert preview["isolation_note"].startswith("Reads read_committed (the group's isolation level is not declared")
    assert "records of aborted transactions are not delivered" in preview["isolation_note"]
    assert "Transactions need no change here" in reset_preview(
        finding_ids=[undeclared.id], target_kind="earliest", target_value=None)["isolation_note"]

    ConsumerGroup.objects.filter(id=undeclared.group_id).update(
        declared_isolation=ConsumerGroup.Isolation.READ_UNCOMMITTED)
    preview = backfill_preview(finding_ids=[undeclared.id])
    assert preview["params"] == {"sink": "parquet", "isolation": "read_uncommitted"}
    assert "records of aborted transactions are delivered" in preview["isolation_note"]
