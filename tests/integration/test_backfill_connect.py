"""Spark backfills on a Spark Connect server (one server for the module;
a test that kills its server starts one of its own): exact ranges to each
sink, a server that dies mid-job, timeouts and interruptions on the server,
its token, and secrets kept out of its logs. Scenarios: backfill_harness.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from io import StringIO
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings

from groups.models import Cluster, RemediationJob
from groups.domain.planning import BackfillRange
from groups.services.remediation import job_transition
from tasks.backfill import runner as backfill
from tasks.backfill.executor import backfill_request_for
from tasks.backfill.runner import WORKDIR_PREFIX, BackfillRequest, run_backfill
from tasks.backfill.launch import ConnectJob
from adapters.kafka.adapter import ClusterConfig, KafkaAdapter
from adapters.spark.connect import ConnectUnavailable, connect_session
from adapters.spark.spec import JobSpec, KafkaSecrets, KafkaSettings, SinkSpec
from tests.integration import spark_handlers
from tests.harness.backfills import (
    BIG, ROOT, K, Scenario, connect_settings, handler_request, on_server, parquet_rows, run_job,
    staging_leftovers, wait_for_connect_attempt,
)
from tests.harness.connect import ConnectServer
from tests.harness.processes import descendants, free_ports, process_children
from tests.harness.kafka_clients import steady, wait_until


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_connect_server_backfills_exactly_the_range_and_a_rerun_replaces_it(
    broker, unique, approver, backfill_settings, enqueued, connect_server
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
    assert [(s["name"], s["done"], s["total"], s["finished"]) for s in job.progress_stages] == [
        ("read and write", 2 * K, 2 * K, True), ("verify", 2 * K, 2 * K, True),
        ("explain and publish", 2 * K, 2 * K, True)]
    assert job.result["verified_by"] == "footers and checksum"
    page = Client()
    page.force_login(approver)
    text = page.get(f"/jobs/{job.id}/").content.decode()
    assert "read and write" in text and "records/s" in text and "explain and publish" in text
    output = Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)
    assert parquet_rows(str(output)) == scenario.expected_rows()
    again = run_backfill(backfill_request_for(job))
    assert again["delivered"] == 2 * K and again["attempts"][0]["mode"] == "connect"
    assert again["attempts"][0]["session_id"] != attempts[0]["session_id"]  # a session per attempt
    assert parquet_rows(str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_connect_server_replays_exactly_the_range_to_the_replay_topic(
    broker, unique, approver, backfill_settings, enqueued, connect_server
):
    connect_settings(backfill_settings, connect_server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K, sink="kafka")
    replay = scenario.replay_topic()

    job = run_job(scenario.request_job(approver, "kafka").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["attempts"][0]["mode"] == "connect"
    assert [(p["partition"], p["delivered"], p["unexplained"]) for p in job.result["partitions"]] \
        == [(2, K, 0), (3, K, 0)]
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
    request = on_server(handler_request(scenario, unique, "tests.integration.spark_handlers.record_log"),
                        connect_server)
    # One run: the server's Python workers connect back before importing pyspark (adapters/spark/python_worker.py),
    # inside Spark's fixed 10 s even on a host whose cores the suite's JVMs crowd.
    result = run_backfill(request)
    assert result["attempts"][0]["mode"] == "connect"
    assert [(p["partition"], p["delivered"], p["unexplained"]) for p in result["partitions"]] \
        == [(2, K, 0), (3, K - 10, 0)]
    lines = sorted(tuple(map(int, line.split()[:2])) for line in handled.read_text().splitlines())
    assert lines == [(2, n) for n in range(K)] + [(3, n) for n in range(10, K)]
    handled.unlink()
    # No Python process outlives the job: a pyspark daemon per job's session stayed for good (47 MiB each).
    wait_until(lambda: not python_children(connect_server.pid), timeout=30,
               what=f"the server's Python processes to end: {python_children(connect_server.pid)}")


def python_children(pid: int) -> list[str]:
    """The command lines of the Python processes below process ``pid``."""
    found = []
    for child in descendants(pid, process_children()):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        if "python" in command:
            found.append(command.strip())
    return found


# --- what a job explains (the same accounting on every path) ---------------------------------


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_reports_offsets_expired_by_retention_instead_of_failing_or_inventing_them(
    broker, unique, approver, backfill_settings, enqueued, connect_server
):
    connect_settings(backfill_settings, connect_server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    expired = 20
    deleted = broker.admin.delete_records([TopicPartition(scenario.topic, 2, expired)])
    for future in deleted.values():
        future.result(timeout=30)

    job = run_job(scenario.request_job(approver, "parquet").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["mode"] for a in job.result["attempts"]] == ["connect"]
    by_partition = {p["partition"]: p for p in job.result["partitions"]}
    assert by_partition[2]["delivered"] == K - expired
    assert by_partition[2]["explained"] == {"retention": expired}
    assert by_partition[2]["missing_ranges"] == [{"start": 0, "end": expired, "cause": "retention"}]
    assert by_partition[3]["delivered"] == K and by_partition[3]["explained"] == {}
    assert f"{scenario.topic}[2]: {expired} retention" in job.status_reason
    rows = parquet_rows(str(Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id)))
    assert rows == scenario.expected_rows(partitions=(2,), first=expired) + scenario.expected_rows(partitions=(3,))


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_explains_aborted_transactions_and_their_markers(broker, unique, backfill_settings, connect_server):
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
    result = run_backfill(on_server(BackfillRequest(
        run_id=f"tx-{unique}", cluster=cluster.cluster_config(), ranges=(BackfillRange(topic, 0, 0, 23),),
        output=settings.BACKFILL_OUTPUT, master="local[2]", timeout_seconds=300), connect_server))

    assert [a["mode"] for a in result["attempts"]] == ["connect"]
    (partition,) = result["partitions"]
    assert partition["delivered"] == 16
    assert partition["explained"] == {"aborted_transaction": 4, "transaction_markers": 3}
    assert partition["unexplained"] == 0
    rows = parquet_rows(str(Path(settings.BACKFILL_OUTPUT) / f"tx-{unique}"))
    assert [row[2] for row in rows] == list(range(10)) + list(range(16, 22))


# --- a server that dies, time-outs, interruptions ------------------------------------------


def handler_settled(handled: Path) -> int:
    """How many records the handler logged once it stopped: no new line for
    3 s (six of its 0.5 s records)."""
    def count() -> int:
        return len(handled.read_text().splitlines()) if handled.exists() else 0

    return wait_until(steady(count, seconds=3), timeout=60, interval=0.25, what="the handler to stop")[0]


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_connect_server_dies_runs_again_in_its_own_process(
    broker, unique, approver, backfill_settings, enqueued, monkeypatch, tmp_path
):
    usual = backfill.RECORDS_PER_TASK
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 500)  # 120 tasks: seconds of work to kill the server in
    monkeypatch.setattr(backfill, "TASKS_PER_CORE", 1_000)  # not capped
    server = ConnectServer(tmp_path / "server.log")
    connect_settings(backfill_settings, server)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", BIG)
    job = scenario.request_job(approver, "parquet")
    killed: list[int] = []

    def kill_server_mid_run() -> None:
        try:
            wait_for_connect_attempt(job.id)
            # The server's attempt has its spec (120 tasks); the one in a process, made after the kill,
            # needs no seconds of work: the usual few tasks.
            monkeypatch.setattr(backfill, "RECORDS_PER_TASK", usual)
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
    assert parquet_rows(str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_timed_out_job_is_interrupted_on_the_server_publishes_nothing_and_the_next_is_served(
    broker, unique, backfill_settings, connect_server
):
    """The slow job is a handler taking 0.5 s a record (90 records on 2
    cores: about 25 s), so its 3 s limit passes while Spark runs it on any
    machine: a Parquet job of 30,000 records once did, until a warm server
    wrote them in less than 3 s (a timing bet, lost on a clean clone)."""
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    handled = spark_handlers.handled_file(scenario.topic)
    handled.unlink(missing_ok=True)
    slow = on_server(dataclasses.replace(
        handler_request(scenario, unique, "tests.integration.spark_handlers.slow_record_log"), timeout_seconds=3),
        connect_server)

    with pytest.raises(backfill.BackfillFailed, match="ran longer than 3s") as failure:
        run_backfill(slow)

    # Interrupted, not waited for: the write failed inside Spark on the interrupt (1), neither ran to its
    # end (0) nor was still running when the runner gave up on it (-1); the handler stopped part-way.
    (attempt,) = failure.value.result["attempts"]
    assert (attempt["mode"], attempt["outcome"], attempt["returncode"]) == ("connect", "timed out", 1), attempt
    # 0.5 s a record on 2 cores: the whole range (90 records) would take ~20 s more.
    assert handler_settled(handled) < 2 * K - 10
    assert staging_leftovers(backfill_settings) == []
    result = run_backfill(on_server(BackfillRequest(
        run_id=f"next-{unique}", cluster=scenario.cluster.cluster_config(), sink="parquet",
        output=backfill_settings.BACKFILL_OUTPUT, ranges=(BackfillRange(scenario.topic, 3, 0, K),),
        timeout_seconds=300), connect_server))
    assert result["delivered"] == K and result["attempts"][0]["mode"] == "connect"
    handled.unlink(missing_ok=True)


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

    # 0.5 s a record on 2 cores: the whole range (90 records) would take ~20 s more.
    assert handler_settled(handled) < 2 * K - 10
    # The worker process reads another database (not the test's), so its folders' install part differs.
    logs = "".join(path.read_text() for path in Path(tempfile.gettempdir()).glob(
        f"{WORKDIR_PREFIX}*-handler-{unique}-*/job.log"))
    assert f"watchdog: the executor went away; interrupted gapwatch-backfill-handler-{unique}-" in logs
    assert "(0 operations)" not in logs
    handled.unlink()
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-handler-{unique}-*"):
        shutil.rmtree(folder, ignore_errors=True)


def test_the_warm_up_writes_and_proves_a_made_up_parquet_job_and_leaves_nothing(connect_server, tmp_path):
    """manage.py warm_spark_connect, as scripts/app.sh runs it beside the
    server: the Parquet sink's write and footer proof of made-up records,
    staged in the backfills' output and discarded."""
    line = connect_server.warm_up(tmp_path, records=20_000)
    assert line.startswith(f"the Spark Connect server is warm at localhost:{connect_server.port}: "
                           "a Parquet write of 20,000 made-up records, verified by footers and checksum; "
                           "no Kafka read (--no-kafka); in "), line
    assert [str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")
            if path.name != "_staging"] == [], "the warm-up left files behind"


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_the_warm_up_then_backfills_a_registered_clusters_newest_records_and_discards_them(
    broker, unique, connect_server, tmp_path
):
    """The second job: the job's own code reads the newest records of the
    fullest partition the cluster has (among the first partitions by topic
    name: a topic named "0…" is among them), verifies and discards them."""
    from django.core.management import call_command

    topic = f"0-warm-{unique}"
    broker.create_topic(topic, 2)
    broker.produce(topic, 1, 3 * K)
    Cluster.objects.create(name=f"warm-{unique}", bootstrap_servers=broker.bootstrap)
    out, err = StringIO(), StringIO()
    with override_settings(SPARK_CONNECT_URL=connect_server.url, SPARK_CONNECT_TOKEN=connect_server.token,
                           BACKFILL_OUTPUT=str(tmp_path)):
        call_command("warm_spark_connect", "--records", str(2 * K), "--wait", "10", "--cluster", f"warm-{unique}",
                     stdout=out, stderr=err)
    line = out.getvalue().strip()
    assert err.getvalue() == "", err.getvalue()
    found = re.search(r"; a backfill of ([\d,]+) records of (.+)\[(\d+)\] on cluster "
                      rf"'warm-{unique}', verified by footers and checksum, discarded; in ", line)
    assert found, line
    delivered, picked, partition = int(found.group(1).replace(",", "")), found.group(2), int(found.group(3))
    offsets = KafkaAdapter(ClusterConfig(broker.bootstrap), timeout=10).partition_offsets(
        topic=picked, partitions=[partition])[partition]
    assert offsets.high_watermark - offsets.log_start >= 3 * K, f"{picked}[{partition}] is not the fullest partition"
    assert delivered == 2 * K, "the newest --records records, each once"
    assert [str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")
            if path.name != "_staging"] == [], "the warm-up left files behind"


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_warm_up_whose_cluster_cannot_be_read_is_warm_for_writes_and_says_why(connect_server, tmp_path):
    from django.core.management import CommandError, call_command

    port = free_ports(1)[0]
    Cluster.objects.create(name="nobody-there", bootstrap_servers=f"127.0.0.1:{port}")
    out, err = StringIO(), StringIO()
    with override_settings(SPARK_CONNECT_URL=connect_server.url, SPARK_CONNECT_TOKEN=connect_server.token,
                           BACKFILL_OUTPUT=str(tmp_path), KAFKA_TIMEOUT_SECONDS=2):
        with pytest.raises(CommandError, match="no cluster is named 'not-registered'"):
            call_command("warm_spark_connect", "--cluster", "not-registered", stdout=out, stderr=err)
        with pytest.raises(CommandError, match="--cluster must not hold a NUL character"):
            call_command("warm_spark_connect", "--cluster", "no\x00body", stdout=out, stderr=err)
        call_command("warm_spark_connect", "--records", "10", "--wait", "10", stdout=out, stderr=err)
    assert err.getvalue().startswith(
        "the Spark Connect server is warm for writes only: no Kafka read: cluster 'nobody-there': "), err.getvalue()
    assert "a Parquet write of 10 made-up records, verified by footers and checksum; no Kafka read: cluster " \
           "'nobody-there': " in out.getvalue()


@pytest.mark.django_db
def test_a_failed_warm_up_is_said_in_one_line_and_the_server_still_serves(connect_server):
    from django.core.management import CommandError, call_command

    with override_settings(SPARK_CONNECT_URL=connect_server.url, SPARK_CONNECT_TOKEN=connect_server.token,
                           BACKFILL_OUTPUT="nosuchfs://bucket/backfills"):  # no file system for this scheme
        with pytest.raises(CommandError, match=f"the warm-up of the Spark Connect server at "
                                               f"localhost:{connect_server.port} failed: ") as failed:
            call_command("warm_spark_connect", "--records", "10", "--wait", "10")
    assert "\n" not in str(failed.value) and connect_server.token not in str(failed.value)
    assert connect_session(connect_server.url, token=connect_server.token).version


@pytest.mark.django_db
def test_the_warm_up_says_when_no_server_answers(tmp_path):
    from django.core.management import CommandError, call_command

    port = free_ports(1)[0]
    with override_settings(SPARK_CONNECT_URL=f"sc://localhost:{port}", BACKFILL_OUTPUT=str(tmp_path)):
        with pytest.raises(CommandError, match=f"no warm-up: no Spark Connect server at localhost:{port}"):
            call_command("warm_spark_connect", "--wait", "0")
        with pytest.raises(CommandError, match="--records must be 1 or more"):
            call_command("warm_spark_connect", "--records", "0")
    with override_settings(SPARK_CONNECT_URL=""):
        with pytest.raises(CommandError, match="SPARK_CONNECT_URL is empty"):
            call_command("warm_spark_connect")


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
    cluster = dataclasses.replace(scenario.cluster.cluster_config(), security_protocol="SASL_PLAINTEXT",
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
            [sys.executable, "-m", "adapters.spark.connect", "--port", "1", "--jars-dir",
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

