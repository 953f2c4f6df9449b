"""A backfill on a three-broker cluster while the leaders of the partitions it
reads are stopped and restarted, one after another, for as long as the job
runs: the job never succeeds with partial work, and the published range is
exact (on the first attempt, or on the retry once the cluster is whole)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from groups.models import RemediationJob
from tests.harness.clusters import QUIET
from tests.harness.clusters import in_sync as in_sync_or_raise
from tests.harness.clusters import leader_of as leader_or_raise
from tests.harness.kafka_clients import Broker, wait_until
from tests.harness.backfills import BIG, JobThread, Scenario, parquet_rows, run_retry

# Enough to stop the leader of each partition the job reads (2, then 3) once while it runs.
RESTARTS = 2


def in_sync(admin: AdminClient, topic: str, replicas: int) -> bool:
    """False, not an error, while a metadata request fails during a restart."""
    try:
        return in_sync_or_raise(admin, topic, replicas)
    except KafkaException:
        return False


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    try:
        return leader_or_raise(admin, topic, partition)
    except KafkaException:
        return -1


def _finished(job_id: int) -> bool:
    return RemediationJob.objects.get(id=job_id).status in RemediationJob.FINISHED


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_leaders_restarted_during_a_backfill_leave_the_range_exact(
    kafka3, unique, approver, settings, tmp_path
):
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.SPARK_MASTER = "local[2]"
    settings.BACKFILL_TIMEOUT_SECONDS = 600
    broker = Broker(kafka3.bootstrap, replication_factor=3)
    scenario = Scenario(broker, f"rb-{unique}", f"replicated-backfill-{unique}", BIG)
    admin = AdminClient({"bootstrap.servers": kafka3.bootstrap, **QUIET})
    wait_until(lambda: in_sync(admin, scenario.topic, 3), timeout=90, what="the topic in sync")
    job = scenario.request_job(approver, "parquet")
    during_job: list[tuple[int, int]] = []  # (partition whose leader was stopped, that leader)
    # The job runs in a thread and the brokers restart from the main thread:
    # a broker started from a thread would die with it (see procs._die_with_parent).
    worker = JobThread(job.id)
    wait_until(lambda: (RemediationJob.objects.get(id=job.id).result or {}).get("attempts") or _finished(job.id),
               timeout=300, interval=0.1, what="the Spark job to start")
    for number in range(RESTARTS):
        if _finished(job.id):
            break
        # Stop the leader of partition 2, then of 3, ...; start it again once another leads.
        partition = 2 + number % 2
        leader = wait_until(lambda p=partition: max(leader_of(admin, scenario.topic, p), 0), timeout=60,
                            what="the partition's leader")
        kafka3.stop_node(leader)
        during_job.append((partition, leader))
        wait_until(lambda p=partition, gone=leader: leader_of(admin, scenario.topic, p) not in (gone, -1),
                   timeout=90, what="a new leader")
        time.sleep(1)
        kafka3.start_node(leader)
        wait_until(lambda: in_sync(admin, scenario.topic, 3), timeout=180, interval=0.25,
                   what="the restarted broker back in sync")
    worker.join()
    assert not worker.failures, worker.failures
    assert during_job, "no leader was stopped while the job ran"
    job = RemediationJob.objects.get(id=job.id)
    output = tmp_path / "backfills" / str(job.id)
    if job.status == RemediationJob.Status.FAILED:
        assert not output.exists(), "a failed job published output"
        wait_until(lambda: in_sync(admin, scenario.topic, 3), timeout=180, interval=1, what="the cluster whole")
        job = run_retry(user=approver, job_id=job.id)
        output = tmp_path / "backfills" / str(job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["delivered"] == job.result["expected"] == 2 * BIG
    assert parquet_rows(str(output)) == scenario.expected_rows()
