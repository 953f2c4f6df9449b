"""Spark backfill remediation against the real broker, real Spark (local[2])
and the real database.

The missed ranges are set up as the poller would leave them: a topic raised
from 2 to 4 partitions, K messages written to each new partition, and gap
findings on partitions 2 and 3 with ``backfill_start``/``backfill_end``
[0, K), created with the ORM under the topic's real topic id. Detection
itself is covered end to end in test_detection.py; here the subject is the
backfill of a known range, so the ranges are exact and the tests do not wait
for consumer groups. Jobs are created by ``groups.services.remediation.job_request``
and run by the real Celery task function, in the test process (the job is
enqueued only after commit; the tests capture that and call the task).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from groups.models import Cluster, ConsumerGroup, Finding, PartitionGeneration, RemediationJob, Topic
from groups.domain.planning import BackfillRange
from groups.services.remediation import job_request, job_transition
from tasks.backfill import runner as backfill
from tasks.backfill.executor import backfill_request_for
from tasks.backfill.runner import BackfillRequest, run_backfill
from tasks.backfill.launch import ConnectJob
from tasks.jobs import run_remediation_job
from tasks.spark.connect import ConnectUnavailable, connect_session
from tasks.spark.spec import JobSpec, KafkaSecrets, KafkaSettings, SinkSpec
from tasks.spark.session import build_session, spark_dir
from tasks.spark.sinks.records import ORIGIN_OFFSET, ORIGIN_PARTITION, ORIGIN_TOPIC
from tests.integration import spark_handlers
from tests.integration.connect_harness import ConnectServer
from tests.integration.kafka_harness import Broker, wait_until

K = 50  # messages missed on each new partition
LATER = 5  # messages the group did read after it picked the partition up: not part of the range
ROOT = Path(__file__).resolve().parents[2]


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def backfill_settings(settings, tmp_path):
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.SPARK_MASTER = "local[2]"
    settings.BACKFILL_TIMEOUT_SECONDS = 300
    return settings


@pytest.fixture
def enqueued(monkeypatch):
    """Jobs job_request would hand to Celery after commit; the tests run them
    with the real task function instead of a shared broker queue."""
    job_ids: list[int] = []
    monkeypatch.setattr("groups.services.remediation._enqueue_on_commit", job_ids.append)
    return job_ids


@pytest.fixture(scope="module")
def spark():
    """A reader of the Parquet output, as any Spark user would read it."""
    session = build_session(master="local[1]", app_name="test-backfill-reader", jars_dir=settings.SPARK_KAFKA_JARS_DIR,
                            driver_memory="512m")
    yield session
    session.stop()


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
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
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

    def request_job(self, user, sink: str) -> RemediationJob:
        return job_request(user=user, finding_ids=[f.id for f in self.findings], kind="backfill",
                           params={"sink": sink})

    def expected_rows(self, *, partitions=(2, 3), first: int = 0) -> list[tuple]:
        return [(self.topic, partition, number, record(partition, number)["key"], record(partition, number)["value"],
                 record(partition, number)["headers"])
                for partition in partitions for number in range(first, self.missed)]


def parquet_rows(spark, path: str) -> list[tuple]:
    frame = spark.read.parquet(path)
    assert sorted(frame.columns) == sorted(["key", "value", "topic", "partition", "offset", "timestamp", "headers"])
    return sorted(
        (row.topic, row.partition, row.offset, bytes(row.key), bytes(row.value),
         [(h.key, bytes(h.value)) for h in row.headers or []])
        for row in frame.collect()
    )


def run_job(job_id: int) -> RemediationJob:
    run_remediation_job(job_id)
    return RemediationJob.objects.get(id=job_id)


def staging_leftovers(settings) -> list[Path]:
    staging = Path(settings.BACKFILL_OUTPUT) / "_staging"
    return sorted(staging.iterdir()) if staging.exists() else []


@pytest.mark.spark
def test_spark_runs_under_gapwatch_home_not_in_the_repository(spark):
    """Spark writes run-time files (spark-warehouse/, derby.log; 4.0.0 also its session
    artifacts/) under the JVM's working directory."""
    working_directory = Path(spark.sparkContext._jvm.System.getProperty("user.dir"))
    assert working_directory == spark_dir() and working_directory != ROOT


# --- the problem scenario ------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_backfills_exactly_the_missed_range_to_parquet_and_a_rerun_replaces_it(
    broker, unique, approver, backfill_settings, enqueued, spark
):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    job = scenario.request_job(approver, "parquet")
    assert enqueued == [job.id] and job.status == RemediationJob.Status.APPROVED

    job = run_job(job.id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert (job.progress_done, job.progress_total) == (2 * K, 2 * K)
    output = Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)
    assert job.result["sink"] == {"kind": "parquet", "output": str(output)}
    assert [(p["partition"], p["expected"], p["delivered"], p["unexplained"]) for p in job.result["partitions"]] \
        == [(2, K, K, 0), (3, K, K, 0)]
    assert parquet_rows(spark, str(output)) == scenario.expected_rows()
    manifest = json.loads((output / "_gapwatch.json").read_text())
    assert manifest["job_id"] == str(job.id) and [p["delivered"] for p in manifest["partitions"]] == [K, K]

    # The same job run again (as after a worker died once it had published):
    # its output is replaced, never doubled.
    again = run_backfill(backfill_request_for(job))
    assert again["delivered"] == 2 * K
    assert parquet_rows(spark, str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []
    assert sorted(p.name for p in Path(backfill_settings.BACKFILL_OUTPUT).iterdir()) \
        == sorted(["_staging", str(job.id)])


# What Spark may leave in its driver's working directory (artifacts/ only up to 4.0: SPARK-52396).
SPARK_RUNTIME_NAMES = ("artifacts", "spark-warehouse", "metastore_db", "derby.log")


def runtime_files(folder: Path) -> dict[str, list[str]]:
    """Spark's run-time files and folders directly in ``folder``, with what each folder holds."""
    found = {}
    for name in SPARK_RUNTIME_NAMES:
        path = folder / name
        if path.exists():
            found[name] = sorted(os.listdir(path)) if path.is_dir() else []
    return found


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_backfill_leaves_sparks_run_time_files_under_gapwatch_home_not_in_the_repository(
    broker, unique, backfill_settings, spark
):
    before = runtime_files(ROOT)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    request = BackfillRequest(run_id=f"rt-{unique}", cluster=scenario.cluster.client_config(),
                              ranges=(BackfillRange(scenario.topic, 2, 0, K),),
                              output=backfill_settings.BACKFILL_OUTPUT, master="local[1]", timeout_seconds=300)

    result = run_backfill(request)

    assert result["delivered"] == K
    output = Path(backfill_settings.BACKFILL_OUTPUT) / f"rt-{unique}"
    assert parquet_rows(spark, str(output)) == scenario.expected_rows(partitions=(2,))
    assert runtime_files(ROOT) == before, "Spark left run-time files in the repository root"


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_replays_exactly_the_range_to_the_replay_topic_with_origin_headers(
    broker, unique, approver, backfill_settings, enqueued
):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K, sink="kafka")
    replay = f"{scenario.topic}.replay"
    broker.topics.append(replay)  # created by the job; deleted after the test
    job = run_job(scenario.request_job(approver, "kafka").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["sink"] == {"kind": "kafka", "topics": {scenario.topic: replay}}
    topics = broker.admin.list_topics(timeout=10).topics
    assert len(topics[replay].partitions) == 4  # the source's count: partition p replays to p

    replayed = replayed_rows(broker, scenario.topic, replay)
    assert sorted(replayed) == scenario.expected_rows()
    # In each partition, in the order of the source.
    assert [r[2] for r in replayed if r[1] == 2] == list(range(K))


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


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_reports_offsets_expired_by_retention_instead_of_failing_or_inventing_them(
    broker, unique, approver, backfill_settings, enqueued, spark
):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    expired = 20
    deleted = broker.admin.delete_records([TopicPartition(scenario.topic, 2, expired)])
    for future in deleted.values():
        future.result(timeout=30)

    job = run_job(scenario.request_job(approver, "parquet").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    by_partition = {p["partition"]: p for p in job.result["partitions"]}
    assert by_partition[2]["delivered"] == K - expired
    assert by_partition[2]["explained"] == {"retention": expired}
    assert by_partition[2]["missing_ranges"] == [{"start": 0, "end": expired, "cause": "retention"}]
    assert by_partition[3]["delivered"] == K and by_partition[3]["explained"] == {}
    assert f"{scenario.topic}[2]: {expired} retention" in job.status_reason
    rows = parquet_rows(spark, str(Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)))
    assert rows == scenario.expected_rows(partitions=(2,), first=expired) + scenario.expected_rows(partitions=(3,))


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_explains_aborted_transactions_and_their_markers(broker, unique, backfill_settings, spark):
    topic = f"backfill-tx-{unique}"
    broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{unique}"})
    producer.init_transactions()
    for outcome, count in (("commit", 10), ("abort", 4), ("commit", 6)):
        producer.begin_transaction()
        for number in range(count):
            producer.produce(topic, partition=0, key=f"{outcome}-{number}".encode(), value=b"v")
        producer.flush(10)
        if outcome == "commit":
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    # offsets: 0-9 committed, 10 marker, 11-14 aborted, 15 marker, 16-21 committed, 22 marker
    cluster = Cluster.objects.create(name=f"bf-{unique}", bootstrap_servers=broker.bootstrap)
    result = run_backfill(BackfillRequest(run_id=f"tx-{unique}", cluster=cluster.client_config(),
                                          ranges=(BackfillRange(topic, 0, 0, 23),), output=settings.BACKFILL_OUTPUT,
                                          master="local[2]", timeout_seconds=300))

    (partition,) = result["partitions"]
    assert partition["delivered"] == 16
    assert partition["explained"] == {"aborted_transaction": 4, "transaction_markers": 3}
    assert partition["unexplained"] == 0
    rows = parquet_rows(spark, str(Path(settings.BACKFILL_OUTPUT) / f"tx-{unique}"))
    assert [row[2] for row in rows] == list(range(10)) + list(range(16, 22))


# --- kills and re-runs ---------------------------------------------------------------------

BIG = 30_000  # per partition: enough Spark tasks (of 2,000 records) to kill the job between two of them


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


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_runs_a_killed_job_process_again_and_publishes_exactly_the_range(
    broker, unique, approver, backfill_settings, enqueued, spark, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 2_000)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", BIG)
    job = scenario.request_job(approver, "parquet")
    killed: list[int] = []

    def kill_mid_run() -> None:
        try:
            pid = wait_for_running_attempt(job.id)
            os.kill(pid, signal.SIGKILL)  # the job process only, as the OOM killer would
            killed.append(pid)
        finally:
            connection.close()  # this thread's own connection

    killer = threading.Thread(target=kill_mid_run)
    killer.start()
    job = run_job(job.id)
    killer.join()

    assert killed, "the job process was not killed mid-run"
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    attempts = job.result["attempts"]
    assert [a["outcome"] for a in attempts] == ["killed by SIGKILL", "published"]
    assert attempts[0]["pid"] == killed[0]
    output = Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)
    assert parquet_rows(spark, str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_restarts_a_job_whose_worker_died_and_publishes_exactly_the_range(
    broker, unique, approver, backfill_settings, enqueued, spark, tmp_path
):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", BIG)
    job = scenario.request_job(approver, "parquet")
    assert job_transition(job_id=job.id, from_statuses=["approved"], to_status="queued")  # as the task does first
    database = settings.DATABASES["default"]
    environment = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{database['USER']}:{database['PASSWORD']}@{database['HOST']}:"
                        f"{database['PORT']}/{database['NAME']}",
        "BACKFILL_OUTPUT": backfill_settings.BACKFILL_OUTPUT, "SPARK_MASTER": "local[2]",
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", "import django; django.setup(); from tasks.backfill import executor, runner; "
         "runner.RECORDS_PER_TASK = 2000; executor.execute_backfill(job_id=int(__import__('sys').argv[1]))",
         str(job.id)],
        cwd=ROOT, env=environment, stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT,
    )
    try:
        job_process = wait_for_running_attempt(job.id)
        worker.kill()  # the worker dies; its job process is not told
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    # The job process sees its pipe to the worker close and exits unpublished.
    wait_until(lambda: not alive(job_process), timeout=30, what="the orphaned job process to exit")
    assert RemediationJob.objects.get(id=job.id).status == RemediationJob.Status.RUNNING
    assert not (Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)).exists()

    job = run_job(job.id)  # Celery redelivers the task (acks_late, reject_on_worker_lost)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["lost with its worker", "published"]
    output = Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)
    assert parquet_rows(spark, str(output)) == scenario.expected_rows(partitions=(2, 3))
    assert staging_leftovers(backfill_settings) == []
    assert list(Path(tempfile.gettempdir()).glob(f"gapwatch-backfill-{job.id}-*")) == []  # the dead attempt's too


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_keeps_sparks_error_on_a_failed_job_and_publishes_nothing(
    broker, unique, approver, backfill_settings, enqueued
):
    backfill_settings.BACKFILL_OUTPUT = "nosuchfs://bucket/backfills"  # no file system for this scheme
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)

    job = run_job(scenario.request_job(approver, "parquet").id)

    assert job.status == RemediationJob.Status.FAILED
    assert job.status_reason == "the Spark job failed (exit code 1)"
    assert "Unrecognized filesystem type in URI: nosuchfs://bucket/backfills" in job.error
    assert [a["outcome"] for a in job.result["attempts"]] == ["failed"]
    assert not job.job_findings.filter(active=True).exists()  # the findings are free for a retry


# --- sinks and the command line -------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_calls_a_python_handler_with_every_record_of_the_range(broker, unique, backfill_settings):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    # builtins.list pulls every record of its Spark partition; the job counts what was pulled.
    result = run_backfill(BackfillRequest(
        run_id=f"handler-{unique}", cluster=scenario.cluster.client_config(), sink="handler", handler="builtins.list",
        ranges=(BackfillRange(scenario.topic, 2, 0, K), BackfillRange(scenario.topic, 3, 10, K)),
        master="local[2]", timeout_seconds=300))
    assert result["sink"] == {"kind": "handler", "handler": "builtins.list"}
    assert [(p["partition"], p["delivered"], p["unexplained"]) for p in result["partitions"]] \
        == [(2, K, 0), (3, K - 10, 0)]


@pytest.mark.django_db(transaction=True)
def test_it_refuses_bad_ranges_on_the_command_line(broker, unique, backfill_settings):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    base = ["backfill", "--cluster", scenario.cluster.name, "--topic", scenario.topic]
    cases = [
        (["--partition", "2", "--start", "10", "--end", "10"], "must be greater than --start"),
        (["--partition", "2", "--start", "-1", "--end", "10"], "must not be negative"),
        (["--partition", "-2", "--start", "0", "--end", "10"], "must not be negative"),
        (["--partition", "9", "--start", "0", "--end", "10"], "has no partition 9"),
        (["--partition", "2", "--start", "0", "--end", str(K + LATER + 1)], "beyond the high watermark"),
    ]
    for arguments, message in cases:
        with pytest.raises(CommandError, match=message):
            call_command(*base, *arguments)
    with pytest.raises(CommandError, match="does not exist"):
        call_command("backfill", "--cluster", scenario.cluster.name, "--topic", f"nope-{unique}",
                     "--partition", "0", "--start", "0", "--end", "1")
    with pytest.raises(CommandError, match="no cluster named"):
        call_command("backfill", "--cluster", f"nope-{unique}", "--topic", scenario.topic,
                     "--partition", "0", "--start", "0", "--end", "1")


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_prints_the_plan_by_default_and_runs_it_with_execute(broker, unique, backfill_settings, spark, capsys):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    arguments = ["backfill", "--cluster", scenario.cluster.name, "--topic", scenario.topic, "--partition", "3",
                 "--start", "5", "--end", str(K)]
    call_command(*arguments)
    plan = capsys.readouterr().out
    assert "plan only: nothing read" in plan
    # TOPIC PARTITION START END RECORDS LOG-START HIGH-WATERMARK EXPIRED TO-READ
    assert [scenario.topic, "3", "5", str(K), str(K - 5), "0", str(K + LATER), "0", str(K - 5)] \
        in [line.split() for line in plan.splitlines()]
    output = Path(backfill_settings.BACKFILL_OUTPUT) / f"cli-{scenario.topic}-3-5-{K}"
    assert not output.exists()

    call_command(*arguments, "--execute")
    printed = capsys.readouterr().out
    assert f"succeeded: {K - 5} of {K - 5} records delivered" in printed
    assert "on a Spark process of its own" in printed  # no Spark host in this test
    assert parquet_rows(spark, str(output)) == [row for row in scenario.expected_rows(partitions=(3,)) if row[2] >= 5]


# --- on a Spark Connect server -------------------------------------------------------------


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect") / "server.log")
    yield server
    server.stop()


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
        run_id=f"handler-{unique}", cluster=scenario.cluster.client_config(), sink="handler", handler=handler,
        ranges=(BackfillRange(scenario.topic, 2, 0, K), BackfillRange(scenario.topic, 3, 10, K)),
        master="local[2]", timeout_seconds=300)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_connect_server_backfills_exactly_the_range_and_a_rerun_replaces_it(
    broker, unique, approver, backfill_settings, enqueued, spark, connect_server
):
    connect_settings(backfill_settings, connect_server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)

    job = run_job(scenario.request_job(approver, "parquet").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    attempts = job.result["attempts"]
    assert [(a["mode"], a["server"], a["outcome"]) for a in attempts] \
        == [("connect", f"localhost:{connect_server.port}", "published")]
    assert attempts[0]["tag"] == f"gapwatch-backfill-{job.id}-{attempts[0]['attempt']}" and attempts[0]["session_id"]
    assert job.progress_done == 2 * K == job.progress_total
    output = Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)
    assert parquet_rows(spark, str(output)) == scenario.expected_rows()
    again = run_backfill(backfill_request_for(job))
    assert again["delivered"] == 2 * K and again["attempts"][0]["mode"] == "connect"
    assert again["attempts"][0]["session_id"] != attempts[0]["session_id"]  # a session per attempt
    assert parquet_rows(spark, str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_connect_server_replays_exactly_the_range_to_the_replay_topic(
    broker, unique, approver, backfill_settings, enqueued, connect_server
):
    connect_settings(backfill_settings, connect_server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K, sink="kafka")
    broker.topics.append(f"{scenario.topic}.replay")

    job = run_job(scenario.request_job(approver, "kafka").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["attempts"][0]["mode"] == "connect"
    assert [(p["partition"], p["delivered"], p["unexplained"]) for p in job.result["partitions"]] \
        == [(2, K, 0), (3, K, 0)]
    replay = f"{scenario.topic}.replay"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{unique}",
                         "enable.auto.commit": False})
    try:
        counts = [consumer.get_watermark_offsets(TopicPartition(replay, p), timeout=10) for p in range(4)]
    finally:
        consumer.close()
    assert [high - low for low, high in counts] == [0, 0, K, K]  # exactly the range, no second copy


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_connect_server_calls_a_python_handler_with_every_record_of_the_range(
    broker, unique, backfill_settings, connect_server
):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    handled = spark_handlers.handled_file(scenario.topic)
    handled.unlink(missing_ok=True)
    result = run_backfill(on_server(handler_request(scenario, unique, "tests.integration.spark_handlers.record_log"),
                                    connect_server))
    assert result["attempts"][0]["mode"] == "connect"
    assert [(p["partition"], p["delivered"], p["unexplained"]) for p in result["partitions"]] \
        == [(2, K, 0), (3, K - 10, 0)]
    lines = sorted(tuple(map(int, line.split()[:2])) for line in handled.read_text().splitlines())
    assert lines == [(2, n) for n in range(K)] + [(3, n) for n in range(10, K)]
    handled.unlink()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_connect_server_dies_runs_again_in_its_own_process(
    broker, unique, approver, backfill_settings, enqueued, spark, monkeypatch, tmp_path
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 500)  # 120 tasks: seconds of work to kill the server in
    server = ConnectServer(tmp_path / "server.log")
    connect_settings(backfill_settings, server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", BIG)
    job = scenario.request_job(approver, "parquet")
    killed: list[int] = []

    def kill_server_mid_run() -> None:
        try:
            wait_for_connect_attempt(job.id)
            server.stop()  # SIGKILL to the server's JVM: a crash, as the OOM killer would
            killed.append(server.pid)
        finally:
            connection.close()

    killer = threading.Thread(target=kill_server_mid_run)
    killer.start()
    try:
        job = run_job(job.id)
    finally:
        killer.join()
        server.stop()

    assert killed, "the Connect server was not killed mid-run"
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    attempts = job.result["attempts"]
    assert [(a["mode"], a["outcome"]) for a in attempts] == [
        ("connect", f"killed by the Spark Connect server at localhost:{server.port} going away (stopped or crashed)"),
        ("process", "published"),
    ]
    assert attempts[1]["connect_unavailable"].startswith(f"no Spark Connect server at localhost:{server.port}")
    output = Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)
    assert parquet_rows(spark, str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_timed_out_job_is_interrupted_on_the_server_publishes_nothing_and_the_next_is_served(
    broker, unique, backfill_settings, connect_server, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 500)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", BIG)
    slow = BackfillRequest(
        run_id=f"slow-{unique}", cluster=scenario.cluster.client_config(), sink="parquet",
        output=backfill_settings.BACKFILL_OUTPUT, ranges=(BackfillRange(scenario.topic, 2, 0, BIG),),
        timeout_seconds=3)

    started = time.monotonic()
    with pytest.raises(backfill.BackfillFailed, match="ran longer than 3s") as failure:
        run_backfill(on_server(slow, connect_server))

    # Interrupted, not waited for: the whole write of 60 tasks takes longer than this.
    assert time.monotonic() - started < 15
    assert failure.value.result["attempts"][0]["mode"] == "connect"
    assert not (Path(backfill_settings.BACKFILL_OUTPUT) / f"slow-{unique}").exists()
    assert staging_leftovers(backfill_settings) == []
    result = run_backfill(on_server(dataclasses.replace(slow, run_id=f"next-{unique}", timeout_seconds=300,
                                                        ranges=(BackfillRange(scenario.topic, 3, 0, K),)),
                                    connect_server))
    assert result["delivered"] == K and result["attempts"][0]["mode"] == "connect"
    assert not (Path(backfill_settings.BACKFILL_OUTPUT) / f"slow-{unique}").exists()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_the_watchdog_interrupts_the_job_of_a_worker_killed_mid_run(
    broker, unique, backfill_settings, connect_server, tmp_path
):
    """The server does not cancel a query whose client died; the attempt's
    watchdog (its own session, so it outlives the worker) interrupts it."""
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    handled = spark_handlers.handled_file(scenario.topic)
    handled.unlink(missing_ok=True)
    request = on_server(handler_request(scenario, unique, "tests.integration.spark_handlers.slow_record_log"),
                        connect_server)
    (tmp_path / "request.pickle").write_bytes(pickle.dumps(request))
    worker = subprocess.Popen(
        [sys.executable, "-c", "import django, pickle, sys; django.setup(); "
         "from tasks.backfill.runner import run_backfill; "
         "run_backfill(pickle.loads(open(sys.argv[1], 'rb').read()))", str(tmp_path / "request.pickle")],
        cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
        stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: handled.exists() and len(handled.read_text().splitlines()) >= 4, timeout=120,
                   what="the handler to be part-way through")
        worker.kill()
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()

    def settled() -> int | None:
        before = len(handled.read_text().splitlines())
        time.sleep(3)
        return before if len(handled.read_text().splitlines()) == before else None

    handled_count = wait_until(settled, timeout=60, interval=0, what="the handler to stop")
    # 0.5 s a record on 2 cores: the whole range (90 records) would take ~20 s more.
    assert handled_count < 2 * K - 10
    logs = "".join(path.read_text() for path in Path(tempfile.gettempdir()).glob(
        f"gapwatch-backfill-handler-{unique}-*/job.log"))
    assert f"watchdog: the executor went away; interrupted gapwatch-backfill-handler-{unique}-" in logs
    assert "(0 operations)" not in logs
    handled.unlink()
    for folder in Path(tempfile.gettempdir()).glob(f"gapwatch-backfill-handler-{unique}-*"):
        shutil.rmtree(folder, ignore_errors=True)


def test_the_connect_server_refuses_a_client_without_its_token(connect_server):
    with pytest.raises(ConnectUnavailable, match="authentication token"):
        connect_session(connect_server.url, token="not-the-token")
    with pytest.raises(ConnectUnavailable, match="No authentication token"):
        connect_session(connect_server.url, token="")
    assert connect_session(connect_server.url, token=connect_server.token).range(3).count() == 3


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_connect_job_masks_the_sasl_password_in_errors_and_the_server_never_logs_it(
    broker, unique, backfill_settings, connect_server, tmp_path
):
    password = f"pw-{unique}-never-shown"
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    cluster = dataclasses.replace(scenario.cluster.client_config(), security_protocol="SASL_PLAINTEXT",
                                  sasl_mechanism="PLAIN", sasl_username="backfill", sasl_password=password)
    spec = JobSpec(job_id=f"sasl-{unique}", attempt="a1", kafka=KafkaSettings(
        bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_username="backfill"), ranges=(BackfillRange(scenario.topic, 2, 0, K),),
        sink=SinkSpec("parquet", output=str(tmp_path / "out")), jars_dir=str(settings.SPARK_KAFKA_JARS_DIR),
        progress_file=str(tmp_path / "progress.json"), result_file=str(tmp_path / "result.json"))
    assert cluster.sasl_password == password

    # SASL against the PLAINTEXT listener: the broker refuses the handshake and Spark fails.
    with open(tmp_path / "job.log", "wb") as log_file:
        job = ConnectJob(url=connect_server.url, token=connect_server.token, spec=spec,
                         secrets=KafkaSecrets(sasl_password=password), log_file=log_file)
    try:
        wait_until(lambda: job.poll() is not None, timeout=240, interval=0.2, what="the job to fail")
    finally:
        job.stop()

    assert job.returncode == 1 and job.lost() is None
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and result["error"]
    assert password not in (tmp_path / "result.json").read_text()
    assert password not in connect_server.log_text()
    assert connect_server.token not in connect_server.log_text()


def test_the_connect_launcher_refuses_a_bad_memory_size_or_no_token_before_starting_spark(tmp_path):
    def launch(memory: str, token: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tasks.spark.connect", "--port", "1", "--jars-dir",
             str(settings.SPARK_KAFKA_JARS_DIR), "--driver-memory", memory],
            cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "SPARK_CONNECT_TOKEN": token})

    answer = launch("lots", "t")
    assert answer.returncode == 2
    assert "--driver-memory (or SPARK_CONNECT_MEMORY) must look like 1g or 768m, got 'lots'" in answer.stderr
    answer = launch("1g", "")
    assert answer.returncode == 2
    assert "SPARK_CONNECT_TOKEN must be set: the server refuses clients without it" in answer.stderr


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_restarted_job_first_interrupts_what_its_dead_workers_attempt_left_running_on_the_server(
    broker, unique, approver, backfill_settings, enqueued, connect_server
):
    connect_settings(backfill_settings, connect_server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    job = scenario.request_job(approver, "parquet")
    # What a dead worker's attempt leaves: the row says running, its query still runs on the server.
    session = connect_session(connect_server.url, token=connect_server.token)
    tag = f"gapwatch-backfill-{job.id}-dead"
    outcome: list[str] = []
    in_flight = threading.Event()  # the query's tasks run (an interrupt before that races its job's start)
    session.registerProgressHandler(lambda stages, inflight_tasks, operation_id, done: (
        in_flight.set() if inflight_tasks > 0 and not done else None))

    def left_running() -> None:
        session.addTag(tag)
        try:
            session.range(0, 10 ** 11, numPartitions=2).where("hash(id) = 0").count()
            outcome.append("finished")
        except Exception as error:  # noqa: BLE001 - the interruption is the point
            outcome.append(str(error))

    query = threading.Thread(target=left_running)
    query.start()
    assert job_transition(job_id=job.id, from_statuses=["approved"], to_status="queued")
    assert job_transition(job_id=job.id, from_statuses=["queued"], to_status="running", result={"attempts": [
        {"attempt": "dead", "mode": "connect", "session_id": session.session_id, "tag": tag, "outcome": "running"}]})
    wait_until(in_flight.is_set, timeout=60, interval=0.05, what="the left-over query's tasks to run")
    assert query.is_alive()

    job = run_job(job.id)  # Celery redelivers the task of the dead worker

    query.join(timeout=60)
    assert not query.is_alive() and "OPERATION_CANCELED" in outcome[0]
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["lost with its worker", "published"]
