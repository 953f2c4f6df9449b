"""Backfills on a real standalone Spark cluster: a master and two workers on
loopback (``spark_cluster``), the job launched as in production (its own
process, ``SPARK_MASTER`` set to the cluster, the connector jars sent to the
executors by Spark). The exact range arrives, whether the job writes Parquet
or a replay topic, and both workers' executors do the work (the application's
event log says which executor ran each task; the executor's log URL names its
worker). A worker SIGKILLed, with its executor, while that executor runs a
task: Spark runs the task again on the other worker, the job's one attempt
succeeds, and the range is still exact."""

from __future__ import annotations

import pytest

from groups.models import RemediationJob
from tasks.backfill import runner as backfill
from tests.harness.kafka_clients import wait_until
from tests.harness.backfills import (
    BIG,
    K,
    JobThread,
    Scenario,
    parquet_rows,
    replayed_rows,
    run_job,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def output_of(job: RemediationJob) -> str:
    return job.result["sink"]["output"]


def the_application(cluster, job: RemediationJob) -> str:
    """The id of the job's one Spark application, finished, as the master lists it."""
    (application,) = cluster.applications(f"gapwatch-backfill-{job.id}")
    assert application["state"] == "FINISHED", application
    return application["id"]


@pytest.mark.django_db(transaction=True)
def test_it_backfills_exactly_the_range_to_parquet_on_both_workers_of_a_cluster(
    broker, unique, approver, enqueued, on_cluster, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 10)  # 10 read tasks for the 2 x 50 records
    monkeypatch.setattr(backfill, "TASKS_PER_CORE", 1_000)  # not capped
    scenario = Scenario(broker, f"sc-{unique}", f"cluster-{unique}", K)

    job = run_job(scenario.request_job(approver, "parquet").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["published"]
    assert parquet_rows(output_of(job)) == scenario.expected_rows()
    by_worker = on_cluster.successes_by_worker(the_application(on_cluster, job))
    assert set(by_worker) == set(on_cluster.workers) and min(by_worker.values()) > 0, by_worker


@pytest.mark.django_db(transaction=True)
def test_it_replays_exactly_the_range_to_a_replay_topic_on_both_workers_of_a_cluster(
    broker, unique, approver, enqueued, on_cluster
):
    scenario = Scenario(broker, f"sc-{unique}", f"cluster-{unique}", K, sink="kafka")
    replay = scenario.replay_topic()

    job = run_job(scenario.request_job(approver, "kafka").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    replayed = replayed_rows(broker, scenario.topic, replay)
    assert sorted(replayed) == scenario.expected_rows()
    assert [r[2] for r in replayed if r[1] == 3] == list(range(K))  # in the source's order
    by_worker = on_cluster.successes_by_worker(the_application(on_cluster, job))
    assert set(by_worker) == set(on_cluster.workers) and min(by_worker.values()) > 0, by_worker


@pytest.mark.kills_a_spark_worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_job_leaves_its_task_to_the_other_worker_and_the_range_exact(
    broker, unique, approver, enqueued, on_cluster, monkeypatch
):
    monkeypatch.setattr(backfill, "RECORDS_PER_TASK", 1_000)  # 60 read tasks
    monkeypatch.setattr(backfill, "TASKS_PER_CORE", 1_000)  # not capped
    scenario = Scenario(broker, f"sc-{unique}", f"cluster-kill-{unique}", BIG)
    job = scenario.request_job(approver, "parquet")
    victim, survivor = sorted(on_cluster.workers)
    # The job runs in a thread; workers are killed and started from the main
    # thread (a process started from a thread dies with it: procs._die_with_parent).
    worker = JobThread(job.id)
    try:
        app_id = wait_until(lambda: [app["id"] for app in on_cluster.applications(f"gapwatch-backfill-{job.id}")],
                            timeout=180, what="the job's Spark application at the master")[0]
        killed_task = on_cluster.kill_worker_running_a_task(victim, app_id=app_id, after_finished=2, timeout=240)
    finally:
        worker.join()
        on_cluster.start_worker()  # two workers again for the tests after this one

    assert not worker.failures, worker.failures
    job = RemediationJob.objects.get(id=job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["published"]  # Spark recovered, not our re-run
    assert parquet_rows(output_of(job)) == scenario.expected_rows()
    assert the_application(on_cluster, job) == app_id
    runs = on_cluster.task_runs(app_id)
    (lost,) = [run for run in runs if run.task_id == killed_task]
    assert (lost.worker, lost.reason) == (victim, "ExecutorLostFailure")
    assert [(run.worker, run.reason) for run in runs if (run.stage, run.index) == (lost.stage, lost.index)
            and run.task_id != killed_task] == [(survivor, "Success")]
    assert on_cluster.successes_by_worker(app_id)[victim] >= 2
