"""A real Celery worker process SIGKILLed (with its whole process group, as a
container kill or the OOM killer would) in the middle of a backfill: nothing
is published by the dead attempt, the job's recovery finds it, another worker
runs it again, and the result is exactly the range, once."""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection

from groups.models import RemediationJob
from tasks.job_lock import LOCK_NAMESPACE
from tests.harness.kafka_clients import wait_until
from tests.harness.workers import start_celery, stop_celery, worker_env
from tests.harness.backfills import BIG, Scenario, alive, parquet_rows, run_retry

pytestmark = pytest.mark.timeout(600)


def _worker_env(backfill_output: str) -> dict[str, str]:
    return worker_env(BACKFILL_OUTPUT=backfill_output, SPARK_MASTER="local[2]", JOB_RECOVERY_SECONDS="2")


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_worker_sigkilled_mid_backfill_is_recovered_and_publishes_exactly_the_range(
    broker, unique, approver, settings, tmp_path
):
    output = tmp_path / "backfills"
    env = _worker_env(str(output))
    scenario = Scenario(broker, f"wk-{unique}", f"worker-{unique}", BIG)
    log = open(tmp_path / "workers.log", "ab")  # noqa: SIM115 - shared by the processes below
    first = start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"first-{unique}@%h"], env, log)
    processes = [first]
    try:
        job = scenario.request_job(approver, "parquet")

        def attempt_pid() -> int | None:
            attempts = (RemediationJob.objects.get(id=job.id).result or {}).get("attempts", [])
            return attempts[0].get("pid") if attempts else None

        spark_pid = wait_until(attempt_pid, timeout=180, interval=0.1, what="the first attempt to start")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        wait_until(lambda: not alive(spark_pid), timeout=60, what="the dead worker's Spark process to end")
        assert RemediationJob.objects.get(id=job.id).status == RemediationJob.Status.RUNNING
        assert not (output / str(job.id)).exists(), "a dead attempt published output"

        # A new worker and beat: beat's recovery finds the running job whose lock nobody holds.
        processes.append(start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"second-{unique}@%h"],
                                env, log))
        processes.append(start_celery(["beat", "--pidfile=", "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
                                env, log))
        wait_until(lambda: RemediationJob.objects.get(id=job.id).status in ("succeeded", "failed"), timeout=300,
                   interval=1, what="the recovered job to finish")
    finally:
        for process in processes:
            stop_celery(process)
        log.close()

    job = RemediationJob.objects.get(id=job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["lost with its worker", "published"]
    assert parquet_rows(str(output / str(job.id))) == scenario.expected_rows()


def _first_attempt_started(job_id: int) -> dict:
    """The job's first attempt, once its Spark process runs (its record names the pid)."""

    def started() -> dict | None:
        attempts = (RemediationJob.objects.get(id=job_id).result or {}).get("attempts", [])
        return attempts[0] if attempts and attempts[0].get("pid") else None

    return wait_until(started, timeout=180, interval=0.1, what="the first attempt to start")


def _driver_env(backfill_output: str) -> dict[str, str]:
    return {**_worker_env(backfill_output), "BACKFILL_DRIVER": "process"}


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_backfill_s_driver_outlives_the_worker_that_launched_it(broker, unique, approver, tmp_path):
    """BACKFILL_DRIVER=process: the jobs worker launches the backfill's driver
    and is free at once; SIGKILLed (its whole process group) while the Spark
    job runs, it changes nothing: no worker is alive while the job ends, with
    its one attempt, exactly the range."""
    output = tmp_path / "backfills"
    scenario = Scenario(broker, f"dr-{unique}", f"driver-{unique}", BIG)
    log = open(tmp_path / "workers.log", "ab")  # noqa: SIM115 - shared by the processes below
    worker = start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"launcher-{unique}@%h"],
                          _driver_env(str(output)), log)
    try:
        job = scenario.request_job(approver, "parquet")

        attempt = _first_attempt_started(job.id)
        assert attempt["runner_pid"] != worker.pid and alive(attempt["runner_pid"])
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        wait_until(lambda: RemediationJob.objects.get(id=job.id).status in ("succeeded", "failed"), timeout=300,
                   interval=1, what="the job to finish with no worker alive")
    finally:
        stop_celery(worker)
        log.close()
    job = RemediationJob.objects.get(id=job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["published"]
    assert parquet_rows(str(output / str(job.id))) == scenario.expected_rows()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_backfill_driver_sigkilled_mid_job_is_launched_again_and_publishes_exactly_the_range(
    broker, unique, approver, tmp_path
):
    """The driver (and its Spark job: a process without its follower ends)
    SIGKILLed mid-job releases the job's lock; beat's recovery launches it
    again and the executor restarts it from what the attempt recorded."""
    output = tmp_path / "backfills"
    env = _driver_env(str(output))
    scenario = Scenario(broker, f"dk-{unique}", f"driverkill-{unique}", BIG)
    log = open(tmp_path / "workers.log", "ab")  # noqa: SIM115 - shared by the processes below
    processes = [start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"jobs-{unique}@%h"], env,
                              log)]
    try:
        job = scenario.request_job(approver, "parquet")

        attempt = _first_attempt_started(job.id)
        os.kill(attempt["runner_pid"], signal.SIGKILL)
        wait_until(lambda: not alive(attempt["pid"]), timeout=60, what="the dead driver's Spark process to end")
        assert not (output / str(job.id)).exists(), "a dead attempt published output"
        processes.append(start_celery(["beat", "--pidfile=", "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
                                      env, log))
        wait_until(lambda: RemediationJob.objects.get(id=job.id).status in ("succeeded", "failed"), timeout=300,
                   interval=1, what="the recovered job to finish")
    finally:
        for process in processes:
            stop_celery(process)
        log.close()
    job = RemediationJob.objects.get(id=job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert [a["outcome"] for a in job.result["attempts"]] == ["lost with its driver", "published"]
    assert parquet_rows(str(output / str(job.id))) == scenario.expected_rows()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_broker_killed_during_a_backfill_never_yields_a_partial_success(
    kafka1, unique, approver, settings, tmp_path
):
    """The job's broker SIGKILLed once the Spark job runs: the job fails having
    published nothing (or, had it finished first, holds exactly the range);
    once the broker is back, a retry delivers exactly the range."""
    import threading

    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    from tasks.celery_tasks import run_remediation_job
    from tests.harness.kafka_clients import Broker

    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.SPARK_MASTER = "local[2]"
    settings.BACKFILL_TIMEOUT_SECONDS = 300
    # The dead broker noticed in seconds, not minutes: Spark asks for the offsets 3 times, each
    # waiting this long (12 s in all where 10 s took 33 s).
    settings.BACKFILL_KAFKA_TIMEOUT_SECONDS = 4
    broker = Broker(kafka1.bootstrap)
    scenario = Scenario(broker, f"bk-{unique}", f"brokerkill-{unique}", BIG)
    job = scenario.request_job(approver, "parquet")

    def kill_mid_run() -> None:
        try:
            wait_until(lambda: (RemediationJob.objects.get(id=job.id).result or {}).get("attempts"), timeout=180,
                       interval=0.1, what="the Spark job to start")
            kafka1.stop_node(1, kill=True)
        finally:
            connection.close()

    chaos = threading.Thread(target=kill_mid_run)
    chaos.start()
    run_remediation_job(job.id)
    chaos.join()
    job = RemediationJob.objects.get(id=job.id)
    output = tmp_path / "backfills" / str(job.id)
    if job.status == RemediationJob.Status.FAILED:
        assert not output.exists(), "a failed job published output"
        # The broker returns; the operator retries once the cluster answers again.
        kafka1.start_node(1)
        admin = AdminClient({"bootstrap.servers": kafka1.bootstrap, "log_level": 0})
        wait_until(lambda: admin.describe_topics(TopicCollection([scenario.topic]))[scenario.topic].result(timeout=10),
                   timeout=120, interval=1, what="the restarted broker to describe the topic",
                   retry_on=(Exception,))
        settings.BACKFILL_KAFKA_TIMEOUT_SECONDS = 30  # the retry meets a live broker: room for a busy machine
        job = run_retry(user=approver, job_id=job.id)
        output = tmp_path / "backfills" / str(job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["delivered"] == job.result["expected"] == 2 * BIG
    assert parquet_rows(str(output)) == scenario.expected_rows()


@pytest.mark.django_db(transaction=True)
def test_a_worker_sigkilled_inside_a_reset_is_recovered_and_the_reset_is_exact(kafka1, unique, approver, tmp_path):
    """The broker frozen so the reset's executor hangs inside its Kafka calls
    (holding the job's lock); the worker is SIGKILLed there. Its message is
    never acknowledged; beat's recovery finds the stalled job, another worker
    runs it, and the offsets read back equal the plan."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from groups.models import Cluster, Finding
    from groups.services.remediation import job_request
    from tasks.polling import poll_cluster
    from tests.harness.clusters import group_left_behind
    from tests.harness.kafka_clients import Broker

    broker = Broker(kafka1.bootstrap)
    cluster = Cluster.objects.create(name=f"kill-{unique}", bootstrap_servers=kafka1.bootstrap)
    topic, group_id = f"orders-{unique}", f"latest-{unique}"
    group_left_behind(broker, cluster, topic, group_id, missed=9)
    wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and Finding.objects.filter(
        topic__name=topic, partition=2, closed_at__isnull=True).exists()
        and cluster.groups.get(group_id=group_id).state == "Empty", what="an Empty group with a finding")
    finding = Finding.objects.get(topic__name=topic, partition=2, closed_at__isnull=True)

    env = {**_worker_env(str(tmp_path / "backfills")), "KAFKA_TIMEOUT_SECONDS": "60",
           "JOB_STALL_SECONDS": "3"}
    log = open(tmp_path / "workers.log", "ab")  # noqa: SIM115 - shared by the processes below
    first = start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"first-{unique}@%h"], env, log)
    processes = [first]
    try:
        kafka1.pause_node(1)
        job = job_request(user=approver, finding_ids=[finding.id], kind="reset", params={"target": "earliest"})

        def lock_held() -> bool:
            with connection.cursor() as cursor:
                # This database's reset lock of this job: pg_locks lists every database's, and the other
                # workers' test databases number their jobs from 1 too.
                cursor.execute("select count(*) from pg_locks where locktype = 'advisory' and database = "
                               "(select oid from pg_database where datname = current_database()) "
                               "and classid = %s and objid = %s", [LOCK_NAMESPACE, job.id % 2**31])
                return cursor.fetchone()[0] > 0

        # Seconds alone. In a full run, 60 s once timed out here: a poll of every cluster, left in the queue
        # by an earlier test's beat, held this one-slot worker on the frozen node for KAFKA_TIMEOUT_SECONDS
        # first (the queues now start empty: tests/faults/conftest.py).
        wait_until(lock_held, timeout=90, interval=0.2, what="the executor to hold the job's lock")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        kafka1.resume_node(1)
        assert RemediationJob.objects.get(id=job.id).status == RemediationJob.Status.QUEUED

        processes.append(start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"second-{unique}@%h"],
                                env, log))
        processes.append(start_celery(["beat", "--pidfile=", "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
                                env, log))
        wait_until(lambda: RemediationJob.objects.get(id=job.id).status in RemediationJob.FINISHED, timeout=180,
                   interval=1, what="the recovered reset to finish")
    finally:
        kafka1.resume_node(1)
        for process in processes:
            stop_celery(process)
        log.close()

    job = RemediationJob.objects.get(id=job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    admin = AdminClient({"bootstrap.servers": kafka1.bootstrap, "log_level": 0})
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, 2)])
    answer = admin.list_consumer_group_offsets([request])[group_id].result(timeout=30)
    assert [tp.offset for tp in answer.topic_partitions] == [0]

