"""Spark backfill remediation against the real broker, real Spark (local[2],
a Spark process of the job's own) and the real database; the same jobs on a
Spark Connect server are in test_backfill_connect.py.

The missed ranges are set up as the poller would leave them (see
backfill_harness.Scenario): a topic raised from 2 to 4 partitions, K messages
written to each new partition, and gap findings on partitions 2 and 3 with
``backfill_start``/``backfill_end`` [0, K). Detection itself is covered end
to end in test_detection.py; here the subject is the backfill of a known
range, so the ranges are exact and the tests do not wait for consumer groups.
Jobs are created by ``groups.services.remediation.job_request`` and run by the
real Celery task function, in the test process (the job is enqueued only after
commit; the tests capture that and call the task).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from groups.models import RemediationJob
from groups.domain.planning import BackfillRange
from groups.services.remediation import job_transition
from tasks.backfill import runner as backfill
from tasks.backfill.executor import backfill_request_for
from tasks.backfill.runner import BackfillRequest, run_backfill, work_prefix
from adapters.spark.session import build_session, spark_dir
from tests.harness.backfills import (
    BIG, LATER, ROOT, K, Scenario, alive, parquet_rows, replayed_rows, run_job, staging_leftovers,
    wait_for_running_attempt,
)
from tests.harness.kafka_clients import wait_until


@pytest.fixture(scope="module")
def local_spark():
    """A Spark session of the test process's own, to see where its JVM runs."""
    session = build_session(master="local[1]", app_name="test-backfill-cwd", jars_dir=settings.SPARK_KAFKA_JARS_DIR,
                            driver_memory="512m")
    yield session
    session.stop()


@pytest.mark.spark
def test_spark_runs_under_gapwatch_home_not_in_the_repository(local_spark):
    """Spark writes run-time files (spark-warehouse/, derby.log; 4.0.0 also its session
    artifacts/) under the JVM's working directory."""
    working_directory = Path(local_spark.sparkContext._jvm.System.getProperty("user.dir"))
    assert working_directory == spark_dir() and working_directory != ROOT


# --- the problem scenario ------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_backfills_exactly_the_missed_range_to_parquet_and_a_rerun_replaces_it(
    broker, unique, approver, backfill_settings, enqueued
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
    assert parquet_rows(str(output)) == scenario.expected_rows()
    manifest = json.loads((output / "_gapwatch.json").read_text())
    assert manifest["job_id"] == str(job.id) and [p["delivered"] for p in manifest["partitions"]] == [K, K]

    # The same job run again (as after a worker died once it had published):
    # its output is replaced, never doubled.
    again = run_backfill(backfill_request_for(job))
    assert again["delivered"] == 2 * K
    assert parquet_rows(str(output)) == scenario.expected_rows()
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
    broker, unique, backfill_settings
):
    before = runtime_files(ROOT)
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K)
    request = BackfillRequest(run_id=f"rt-{unique}", cluster=scenario.cluster.cluster_config(),
                              ranges=(BackfillRange(scenario.topic, 2, 0, K),),
                              output=backfill_settings.BACKFILL_OUTPUT, master="local[1]", timeout_seconds=300)

    result = run_backfill(request)

    assert result["delivered"] == K
    output = Path(backfill_settings.BACKFILL_OUTPUT) / f"rt-{unique}"
    assert parquet_rows(str(output)) == scenario.expected_rows(partitions=(2,))
    assert runtime_files(ROOT) == before, "Spark left run-time files in the repository root"


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_replays_exactly_the_range_to_the_replay_topic_with_origin_headers(
    broker, unique, approver, backfill_settings, enqueued
):
    scenario = Scenario(broker, f"bf-{unique}", f"backfill-{unique}", K, sink="kafka")
    replay = scenario.replay_topic()
    job = run_job(scenario.request_job(approver, "kafka").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["sink"] == {"kind": "kafka", "topics": {scenario.topic: replay}}
    topics = broker.admin.list_topics(timeout=10).topics
    assert len(topics[replay].partitions) == 4  # the source's count: partition p replays to p

    replayed = replayed_rows(broker, scenario.topic, replay)
    assert sorted(replayed) == scenario.expected_rows()
    # In each partition, in the order of the source.
    assert [r[2] for r in replayed if r[1] == 2] == list(range(K))



# --- kills and re-runs ---------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_runs_a_killed_job_process_again_and_publishes_exactly_the_range(
    broker, unique, approver, backfill_settings, enqueued, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 2_000)
    monkeypatch.setattr(backfill, "TASKS_PER_CORE", 1_000)  # 60 tasks: not capped
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
    assert parquet_rows(str(output)) == scenario.expected_rows()
    assert staging_leftovers(backfill_settings) == []


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_it_restarts_a_job_whose_worker_died_and_publishes_exactly_the_range(
    broker, unique, approver, backfill_settings, enqueued, tmp_path
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
         "runner.RECORDS_PER_TASK = 2000; runner.TASKS_PER_CORE = 1000; executor.execute_backfill(job_id=int(__import__('sys').argv[1]))",
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
    assert parquet_rows(str(output)) == scenario.expected_rows(partitions=(2, 3))
    assert staging_leftovers(backfill_settings) == []
    assert list(Path(tempfile.gettempdir()).glob(f"{work_prefix(str(job.id))}*")) == []  # the dead attempt's too


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
        run_id=f"handler-{unique}", cluster=scenario.cluster.cluster_config(), sink="handler", handler="builtins.list",
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
def test_it_prints_the_plan_by_default_and_runs_it_with_execute(broker, unique, backfill_settings, capsys):
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
    assert parquet_rows(str(output)) == [row for row in scenario.expected_rows(partitions=(3,)) if row[2] >= 5]


def test_two_installs_never_share_a_jobs_work_folders(settings):
    """A job clears its dead attempts' folders by their prefix: another install
    (or the suite's other worker, with a database of its own) numbers its jobs
    alike, and its live attempt's folder must not match."""
    mine = work_prefix("1")
    settings.DATABASES = {**settings.DATABASES, "default": {**settings.DATABASES["default"], "NAME": "other"}}
    theirs = work_prefix("1")
    assert mine != theirs and not theirs.startswith(mine) and not mine.startswith(theirs)
    assert not work_prefix("12").startswith(work_prefix("1")), "job 1 never takes job 12's folders"
