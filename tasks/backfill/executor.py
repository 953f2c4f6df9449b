"""The executor of ``backfill`` jobs: the job row around one
``tasks.backfill.runner.BackfillRunner`` run; and the requests that runner
gets from the database (a job's, or the command line's for a cluster).

A worker killed mid-job leaves the job ``running``; Celery redelivers the
task (acks_late, reject_on_worker_lost). While an attempt runs, its worker
holds a PostgreSQL advisory lock on the job (released by PostgreSQL when
that worker's connection dies), so a redelivered task that gets the lock
knows no attempt is alive and restarts the job (running -> running,
through ``job_transition``), after interrupting what a dead attempt left
running on a Spark Connect server; one that does not get it leaves the job
alone.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from django.conf import settings

from groups.domain.backfill import summary_line
from groups.domain.planning import BackfillRange, PlanError
from groups.domain.read_isolation import READ_COMMITTED, reader_isolation
from groups.domain.sinks import BackfillSink
from groups.models import Cluster, RemediationJob
from groups.selectors.jobs import job_status, job_to_run, job_topic_ids
from groups.services.jobs import job_record_progress, job_record_reason, job_record_result, job_record_stages
from groups.services.remediation import job_transition
from tasks.backfill.runner import BackfillFailed, BackfillRequest, BackfillRunner, work_prefix
from tasks.job_lock import job_lock
from adapters.kafka.adapter import KafkaUnavailable
from adapters.spark.connect import ConnectUnavailable, interrupt

log = logging.getLogger(__name__)

Status = RemediationJob.Status


def backfill_request_for(job: RemediationJob) -> BackfillRequest:
    """The job's plan, and the sink and isolation level its approval decided
    (``BackfillSink`` and ``isolation`` in its params: the group's settings
    of today do not change them; a job approved without one reads
    read_committed), with the topic ids its findings were made under."""
    ranges = tuple(BackfillRange(r["topic"], int(r["partition"]), int(r["start"]), int(r["end"])) for r in job.plan)
    if not ranges:
        raise PlanError("the job has no planned range")
    topic_ids = job_topic_ids(job=job)
    return cluster_request(cluster=job.cluster, ranges=ranges, sink=BackfillSink.from_params(job.params),
                           run_id=str(job.id), topic_ids=topic_ids,
                           isolation=reader_isolation(job.params.get("isolation", "")))


def cluster_request(*, cluster: Cluster, ranges: tuple[BackfillRange, ...], sink: BackfillSink, run_id: str,
                    topic_ids: dict[str, str] | None = None, isolation: str = READ_COMMITTED) -> BackfillRequest:
    """A request with the settings of this install; the command line's has
    no job row (the output is named ``run_id``) and no topic ids."""
    return BackfillRequest(
        run_id=run_id, cluster=cluster.cluster_config(), ranges=tuple(ranges), sink=sink.kind,
        replay_topics=sink.replay_topics({r.topic for r in ranges}), handler=sink.handler,
        topic_ids=topic_ids or {}, isolation=isolation, output=str(settings.BACKFILL_OUTPUT),
        timeout_seconds=settings.BACKFILL_TIMEOUT_SECONDS,
        transaction_wait_seconds=settings.BACKFILL_TRANSACTION_WAIT_SECONDS, master=settings.SPARK_MASTER,
        spark_connect=settings.SPARK_CONNECT_URL, spark_connect_token=settings.SPARK_CONNECT_TOKEN,
    )


def execute_backfill(*, job_id: int, launched: bool = False) -> str:
    """Run one backfill job; return its status afterwards.

    1. Take the job's advisory lock; if another worker holds it, an attempt
       is alive there: leave the job alone.
    2. queued -> running. A job already ``running`` (its worker or driver
       died: we hold the lock) is restarted, running -> running; any other
       status is left as it is. ``launched``: a driver's run
       (``tasks.backfill.driver``), whose launch moved the job to
       ``running``: without an attempt recorded, it is no restart.
    3. Run (``BackfillRunner``), recording attempts and progress on the row.
    4. running -> succeeded with the per-partition result, or -> failed with
       the reason, Spark's error text and what is known.
    """
    job = job_to_run(job_id=job_id)
    if job.kind != RemediationJob.Kind.BACKFILL:
        raise ValueError(f"job {job_id} is a {job.kind} job, not a backfill")
    with job_lock(job_id) as locked:
        if not locked:
            return "running elsewhere"
        # Work folders of attempts whose worker died (nobody else runs this job: we hold its lock).
        for stale in Path(tempfile.gettempdir()).glob(f"{work_prefix(str(job_id))}*"):
            shutil.rmtree(stale, ignore_errors=True)
        earlier: list[dict] = []
        if not job_transition(job_id=job_id, from_statuses=[Status.QUEUED], to_status=Status.RUNNING,
                              status_reason="starting the Spark job", error="", progress_done=0):
            job.refresh_from_db()
            if job.status != Status.RUNNING:
                return job.status
        if job.status == Status.RUNNING and not (launched and not (job.result or {}).get("attempts")):
            lost = [a for a in (job.result or {}).get("attempts", []) if a.get("outcome") == "running"]
            _interrupt_lost_attempts(lost)
            runner = "driver" if launched else "worker"
            earlier = [{**a, "outcome": f"lost with its {runner}"} if a.get("outcome") == "running" else a
                       for a in (job.result or {}).get("attempts", [])]
            if not job_transition(job_id=job_id, from_statuses=[Status.RUNNING], to_status=Status.RUNNING,
                                  status_reason=f"restarted: the {runner} running it ended without a result",
                                  error="", progress_done=0, result={"attempts": earlier}):
                return _status_of(job_id)
        job.refresh_from_db()

        def on_progress(done: int, total: int) -> None:
            job_record_progress(job_id=job_id, done=done, total=total)

        def on_stages(stages: list[dict]) -> None:
            job_record_stages(job_id=job_id, stages=stages)

        def on_attempt(attempts: list[dict]) -> None:
            job_record_result(job_id=job_id, result={"attempts": earlier + attempts})

        def on_wait(reason: str) -> None:
            job_record_reason(job_id=job_id, reason=reason)

        try:
            request = backfill_request_for(job)
            result = BackfillRunner(request, on_progress=on_progress, on_attempt=on_attempt, on_wait=on_wait,
                                    on_stages=on_stages).run()
        except BackfillFailed as failure:
            result = {**failure.result, "attempts": earlier + failure.result.get("attempts", [])}
            job_transition(job_id=job_id, from_statuses=[Status.RUNNING], to_status=Status.FAILED,
                           status_reason=failure.reason, error=failure.error, result=result)
            return _status_of(job_id)
        except (PlanError, KafkaUnavailable) as error:
            job_transition(job_id=job_id, from_statuses=[Status.RUNNING], to_status=Status.FAILED,
                           status_reason="nothing was delivered", error=str(error),
                           result={"attempts": earlier})
            return _status_of(job_id)
        except Exception as error:
            # Never leave a job "running" behind while its worker lives on.
            job_transition(job_id=job_id, from_statuses=[Status.RUNNING], to_status=Status.FAILED,
                           status_reason="unexpected error in the executor",
                           error=f"{type(error).__name__}: {error}", result={"attempts": earlier})
            raise
        result["attempts"] = earlier + result["attempts"]
        job_transition(job_id=job_id, from_statuses=[Status.RUNNING], to_status=Status.SUCCEEDED, result=result,
                       status_reason=summary_line(result["partitions"]), error="",
                       progress_done=result["delivered"], progress_total=result["expected"])
        return _status_of(job_id)


def _interrupt_lost_attempts(attempts: list[dict]) -> None:
    """Attempts of a dead worker that ran on a Spark Connect server may still
    run there (the server does not cancel them); their watchdog interrupts
    them, and so does this, before the job starts again."""
    for attempt in attempts:
        if attempt.get("mode") != "connect" or not attempt.get("session_id") or not settings.SPARK_CONNECT_URL:
            continue
        try:
            interrupt(settings.SPARK_CONNECT_URL, token=settings.SPARK_CONNECT_TOKEN,
                      session_id=attempt["session_id"], tag=attempt["tag"])
        except ConnectUnavailable as error:
            log.warning("could not interrupt %s of a dead worker: %s", attempt.get("tag"), error)


def _status_of(job_id: int) -> str:
    return job_status(job_id=job_id)
