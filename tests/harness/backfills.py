"""What the backfill tests share (tests/integration and tests/faults): a
topic raised from 2 to 4 partitions with known missed ranges and gap findings
on them (``Scenario``), readers of what a job delivered (Parquet through
pyarrow, as any Parquet user would read it; the replay topic through a
consumer), jobs run to their end, in a thread, or waited on part-way, and a
sink's input made by Spark without Kafka (``spark_records``)."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow
import pyarrow.dataset
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from django.db import connection

from groups.models import Cluster, ConsumerGroup, Finding, PartitionGeneration, RemediationJob, Topic
from groups.domain.planning import BackfillRange
from groups.services.remediation import job_request, job_retry
from tasks.backfill.runner import BackfillRequest
from tasks.celery_tasks import run_remediation_job
from adapters.spark.sinks.columns import ORIGIN_OFFSET, ORIGIN_PARTITION, ORIGIN_TOPIC
from tests.harness.connect import ConnectServer
from tests.harness.kafka_clients import EXACTLY_ONCE_WRITES, Broker, wait_until

K = 50  # messages missed on each new partition
LATER = 5  # messages the group did read after it picked the partition up: not part of the range
BIG = 30_000  # per partition: enough Spark tasks (of 2,000 records) to kill the job between two of them
ROOT = Path(__file__).resolve().parents[2]


def record(partition: int, number: int) -> dict:
    return {"key": f"key-{partition}-{number}".encode(), "value": f"value-{partition}-{number}".encode() * 4,
            "headers": [("trace", f"trace-{partition}-{number}".encode()), ("n", str(number).encode())]}


class Scenario:
    """A topic raised from 2 to 4 partitions; ``missed`` messages written to
    partitions 2 and 3 before the group picked them up, then ``LATER`` it
    read; gap findings on 2 and 3 for [0, missed)."""

    def __init__(self, broker: Broker, cluster_name: str, topic: str, missed: int, *, sink: str = "parquet") -> None:
        self.broker, self.topic, self.missed = broker, topic, missed
        broker.create_topic(topic, 2)
        broker.produce(topic, 0, 3)
        broker.produce(topic, 1, 3)
        broker.raise_partitions(topic, 4)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, **EXACTLY_ONCE_WRITES})
        # A new producer learns the new partitions from its own metadata (on several brokers, not at once).
        wait_until(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions) == 4,
                   what=f"the producer to see 4 partitions of {topic}")
        for partition in (2, 3):
            for number in range(missed + LATER):
                producer.produce(topic, partition=partition, **record(partition, number))
                if number % 10_000 == 0:
                    producer.poll(0)
        assert producer.flush(60) == 0
        topic_id = str(broker.admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id)
        now = datetime.now(UTC)
        self.cluster = Cluster.objects.create(name=cluster_name, bootstrap_servers=broker.bootstrap)
        topic_row = Topic.objects.create(cluster=self.cluster, name=topic, kafka_topic_id=topic_id, partition_count=4,
                                         first_seen_at=now, updated_at=now)
        PartitionGeneration.objects.create(topic=topic_row, number=1, kafka_topic_id=topic_id, partitions=[0, 1],
                                           observed_at=now)
        generation = PartitionGeneration.objects.create(topic=topic_row, number=2, kafka_topic_id=topic_id,
                                                        partitions=[0, 1, 2, 3], added_partitions=[2, 3],
                                                        observed_at=now)
        self.group = ConsumerGroup.objects.create(cluster=self.cluster, group_id=f"{topic}-latest", state="Stable",
                                                  member_count=1, backfill_sink=sink, first_seen_at=now,
                                                  last_seen_at=now)
        self.findings = [
            Finding.objects.create(
                cluster=self.cluster, group=self.group, topic=topic_row, partition=partition, generation=generation,
                state=Finding.State.GAP, created_at=now, updated_at=now, first_log_start=0, log_start_offset=0,
                high_watermark=missed + LATER, committed_offset=missed + LATER, lag=0, pre_pickup_high_watermark=missed,
                first_commit=missed + LATER, missed_definite=missed, missed_possible=0, backfill_start=0,
                backfill_end=missed, policy_source="assumed",
            )
            for partition in (2, 3)
        ]

    def replay_topic(self) -> str:
        """The replay topic a ``kafka`` job creates (``<topic>.replay``),
        deleted after the test with the broker's own topics."""
        replay = f"{self.topic}.replay"
        self.broker.topics.append(replay)
        return replay

    def request_job(self, user, sink: str) -> RemediationJob:
        return job_request(user=user, finding_ids=[f.id for f in self.findings], kind="backfill",
                           params={"sink": sink})

    def expected_rows(self, *, partitions=(2, 3), first: int = 0) -> list[tuple]:
        rows = []
        for partition in partitions:
            for number in range(first, self.missed):
                written = record(partition, number)
                rows.append((self.topic, partition, number, written["key"], written["value"], written["headers"]))
        return rows


def parquet_rows(path: str) -> list[tuple]:
    """The rows of a job's Parquet output (its folder, partitioned by topic and partition;
    files named ``_*`` are not data)."""
    folders = pyarrow.dataset.partitioning(
        pyarrow.schema([("topic", pyarrow.string()), ("partition", pyarrow.int32())]), flavor="hive")
    table = pyarrow.dataset.dataset(path, format="parquet", partitioning=folders).to_table()
    assert sorted(table.column_names) == sorted(["key", "value", "topic", "partition", "offset", "timestamp", "headers"])
    # Column by column: a dict per row (``to_pylist``) cost seconds of CPU for the 60,000 rows of a BIG job.
    columns = table.select(["topic", "partition", "offset", "key", "value", "headers"]).to_pydict()
    headers = [[(header["key"], bytes(header["value"])) for header in row or []] for row in columns["headers"]]
    return sorted(zip(columns["topic"], columns["partition"], columns["offset"], map(bytes, columns["key"]),
                      map(bytes, columns["value"]), headers))


def run_job(job_id: int) -> RemediationJob:
    run_remediation_job(job_id)
    return RemediationJob.objects.get(id=job_id)


def run_retry(*, user, job_id: int) -> RemediationJob:
    """The operator's retry of a failed job, run to its end."""
    return run_job(job_retry(user=user, job_id=job_id).id)


class JobThread:
    """``run_remediation_job`` in a thread of its own, so that the test's main
    thread can stop and start servers meanwhile (a process started from a
    thread dies with it: procs._die_with_parent). ``failures`` holds what the
    job raised, for the test to assert on after ``join``."""

    def __init__(self, job_id: int) -> None:
        self.failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(job_id,))
        self._thread.start()

    def _run(self, job_id: int) -> None:
        try:
            run_remediation_job(job_id)
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            self.failures.append(error)
        finally:
            connection.close()

    def join(self) -> None:
        self._thread.join()


def staging_leftovers(settings) -> list[Path]:
    staging = Path(settings.BACKFILL_OUTPUT) / "_staging"
    return sorted(staging.iterdir()) if staging.exists() else []


def replayed_rows(broker: Broker, topic: str, replay: str) -> list[tuple]:
    """Every record of the 4 partitions of ``replay``, in the order read, as
    (source topic, partition, source offset, key, value, original headers);
    each carries origin headers that name its source record."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{replay}",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(replay, p, 0) for p in range(4)])
    replayed, at_end = [], set()
    deadline = time.monotonic() + 30
    while len(at_end) < 4 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF
            at_end.add(message.partition())
            continue
        headers = dict(message.headers())
        assert headers[ORIGIN_TOPIC] == topic.encode()
        assert int(headers[ORIGIN_PARTITION]) == message.partition()
        original = [(k, v) for k, v in message.headers() if not k.startswith("gapwatch-")]
        replayed.append((topic, message.partition(), int(headers[ORIGIN_OFFSET]), message.key(),
                         message.value(), original))
    consumer.close()
    assert len(at_end) == 4, f"only partitions {sorted(at_end)} of {replay} read to the end"
    return replayed




def wait_for_running_attempt(job_id: int, attempt: int = 0) -> int:
    """The pid of the job process once it has written part of the range."""

    def started() -> int | None:
        job = RemediationJob.objects.get(id=job_id)
        attempts = (job.result or {}).get("attempts", [])
        if len(attempts) > attempt and attempts[attempt].get("pid") and 0 < (job.progress_done or 0) < 2 * BIG:
            return attempts[attempt]["pid"]
        return None

    return wait_until(started, timeout=180, interval=0.05, what=f"job {job_id} to be part-way through")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped yet) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False




def on_server(request: BackfillRequest, server: ConnectServer, **changes) -> BackfillRequest:
    return dataclasses.replace(request, spark_connect=server.url, spark_connect_token=server.token, **changes)


def connect_settings(settings, server: ConnectServer) -> None:
    settings.SPARK_CONNECT_URL = server.url
    settings.SPARK_CONNECT_TOKEN = server.token


def wait_for_connect_attempt(job_id: int) -> dict:
    """The job's first attempt once it runs on the server (its session is recorded as it starts)."""

    def started() -> dict | None:
        job = RemediationJob.objects.get(id=job_id)
        attempts = (job.result or {}).get("attempts", [])
        if attempts and attempts[0].get("session_id") and (job.progress_done or 0) < 2 * BIG:
            return attempts[0]
        return None

    return wait_until(started, timeout=180, interval=0.05, what=f"job {job_id} to be part-way through")


def handler_request(scenario: Scenario, unique: str, handler: str) -> BackfillRequest:
    return BackfillRequest(
        run_id=f"handler-{unique}", cluster=scenario.cluster.cluster_config(), sink="handler", handler=handler,
        ranges=(BackfillRange(scenario.topic, 2, 0, K), BackfillRange(scenario.topic, 3, 10, K)),
        master="local[2]", timeout_seconds=300)




def spark_records(spark, topic: str, *, records: int, tasks: int, offset_expression: str = "id"):
    """A sink's input made by Spark, no Kafka read: ``records`` records of
    partitions 0 and 1 of ``topic`` (offset = ``offset_expression`` of
    Spark's ``id``), in ``tasks`` tasks per partition."""
    frames = []
    for partition in (0, 1):
        frames.append(spark.range(0, records, 1, tasks).selectExpr(
            "cast(concat('key-', id) as binary) as key", "cast(repeat('v', 20) as binary) as value",
            f"'{topic}' as topic", f"cast({partition} as int) as partition", f"{offset_expression} as offset",
            "timestamp_millis(id) as timestamp",
            "cast(array() as array<struct<key: string, value: binary>>) as headers"))
    return frames[0].unionByName(frames[1])
