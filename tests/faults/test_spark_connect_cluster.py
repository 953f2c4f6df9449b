"""Backfills through a Spark Connect server whose master is a real
standalone cluster (``spark_cluster``: a master and two workers on
loopback): the server runs as one Spark application on the cluster, every
job a session of it. The exact range arrives as Parquet, on a replay topic
and through a Python handler (whose code reaches the executors only as the
session's artifacts: their Python has no path to this project), and both
workers' executors do each job's work (the application's event log says
which executor ran each task; the executor's log URL names its worker).

The server is the session's (``cluster_server``): it holds one core of each
worker, and the cluster's job processes run on the other."""

from __future__ import annotations

from pathlib import Path

import pytest

from groups.domain.planning import BackfillRange
from groups.models import RemediationJob
from tasks.backfill import runner as backfill
from tasks.backfill.runner import BackfillRequest, run_backfill
from tests.integration import spark_handlers
from tests.harness.processes import spark_archive_options
from tests.harness.backfills import (
    K,
    Scenario,
    parquet_rows,
    replayed_rows,
    run_job,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def the_server_application(cluster) -> str:
    (application,) = [app for app in cluster.applications("gapwatch-spark-connect") if app["state"] == "RUNNING"]
    return application["id"]


def work_of(cluster, action) -> dict[str | None, int]:
    """What ``action`` added to each worker's successful tasks."""
    app_id = the_server_application(cluster)
    before = cluster.successes_by_worker(app_id)
    action()
    after = cluster.successes_by_worker(app_id)
    return {worker: after.get(worker, 0) - before.get(worker, 0) for worker in after}


@pytest.mark.django_db(transaction=True)
def test_a_connect_server_on_the_cluster_backfills_exactly_the_range_to_parquet_on_both_workers(
    broker, unique, approver, enqueued, on_server, spark_cluster, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 10)  # 10 read tasks for the 2 x 50 records
    monkeypatch.setattr(backfill, "TASKS_PER_CORE", 1_000)  # not capped
    scenario = Scenario(broker, f"cc-{unique}", f"connect-cluster-{unique}", K)
    job_id = scenario.request_job(approver, "parquet").id
    jobs: list[RemediationJob] = []

    by_worker = work_of(spark_cluster, lambda: jobs.append(run_job(job_id)))

    (job,) = jobs
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [(a["mode"], a["outcome"]) for a in job.result["attempts"]] == [("connect", "published")]
    assert parquet_rows(job.result["sink"]["output"]) == scenario.expected_rows()
    assert set(by_worker) == set(spark_cluster.workers) and min(by_worker.values()) > 0, by_worker


@pytest.mark.django_db(transaction=True)
def test_a_connect_server_on_the_cluster_replays_exactly_the_range_on_both_workers(
    broker, unique, approver, enqueued, on_server, spark_cluster, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 10)
    scenario = Scenario(broker, f"cc-{unique}", f"connect-cluster-{unique}", K, sink="kafka")
    replay = scenario.replay_topic()
    job_id = scenario.request_job(approver, "kafka").id
    jobs: list[RemediationJob] = []

    by_worker = work_of(spark_cluster, lambda: jobs.append(run_job(job_id)))

    (job,) = jobs
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["attempts"][0]["mode"] == "connect"
    replayed = replayed_rows(broker, scenario.topic, replay)
    assert sorted(replayed) == scenario.expected_rows()
    assert [r[2] for r in replayed if r[1] == 3] == list(range(K))  # in the source's order
    assert set(by_worker) == set(spark_cluster.workers) and min(by_worker.values()) > 0, by_worker


@pytest.mark.django_db(transaction=True)
def test_a_handler_runs_on_the_clusters_executors_from_the_shipped_code(
    broker, unique, on_server, spark_cluster, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 10)
    scenario = Scenario(broker, f"cc-{unique}", f"connect-cluster-{unique}", K)
    handled = spark_handlers.handled_file(scenario.topic)
    handled.unlink(missing_ok=True)
    results: list[dict] = []

    by_worker = work_of(spark_cluster, lambda: results.append(run_backfill(BackfillRequest(
        run_id=f"handler-{unique}", cluster=scenario.cluster.cluster_config(), sink="handler",
        handler="tests.integration.spark_handlers.record_log", ranges=(BackfillRange(scenario.topic, 2, 0, K),),
        spark_connect=on_server.url, spark_connect_token=on_server.token, timeout_seconds=300))))

    (result,) = results
    assert result["attempts"][0]["mode"] == "connect"
    assert [(p["partition"], p["delivered"], p["unexplained"]) for p in result["partitions"]] == [(2, K, 0)]
    lines = [line.split() for line in handled.read_text().splitlines()]
    assert sorted(int(offset) for _, offset, _ in lines) == list(range(K))
    # The executors imported the handler from the archive the job shipped, not from this checkout.
    assert {origin.split(".zip/")[-1] for _, _, origin in lines} == {"tests/integration/spark_handlers.py"}
    assert all("gapwatch-job-code.zip/" in origin for _, _, origin in lines), lines[0]
    assert set(by_worker) == set(spark_cluster.workers) and min(by_worker.values()) > 0, by_worker
    handled.unlink()


def test_the_clusters_jvms_map_sparks_class_archive(spark_cluster, cluster_server):
    """The master, the workers and a client (the Connect server on the cluster)
    map the archive: a SPARK_CONF_DIR with files on their class path made
    every one of them refuse it."""
    (option,) = spark_archive_options()  # scripts/env.sh adds it once set-up wrote the archive
    archive = option.split("=", 1)[1]
    jvms = [spark_cluster.master, *spark_cluster.workers.values()]
    pids = [process.pid for process in jvms if process.poll() is None] + [cluster_server.pid]
    assert len(pids) >= 3
    for pid in pids:
        assert archive in Path(f"/proc/{pid}/maps").read_text(), f"JVM {pid} did not map {archive}"
