"""Celery tasks. Thin: they take ids, load objects and call services."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from groups.models import RemediationJob
from groups.selectors.clusters import cluster_ids_enabled
from groups.selectors.jobs import job_ids_running, job_ids_stalled, job_kind
from groups.selectors.finding import findings_to_count
from groups.services.cadence import tick_record
from groups.services.jobs import job_note_unrunnable, jobs_touch_stalled
from groups.services.polls import cluster_record_skipped_poll
from groups.services.redis_client import redis_lock
from groups.services.remediation import job_transition
from groups.services.resets import reset_jobs_retry_waiting
from tasks.connection import run_connection_test
from tasks.expansion.run import expansions_to_resume, run_expansion
from tasks.expansion.verdict import validate_partitions
from tasks.executors import EXECUTORS
from tasks.job_lock import job_lock_free
from tasks.notifications import send_notification
from tasks.poll_parts import PART_TASK, answer_part
from tasks.polling import cluster_adapter, count_missed_records, forget_adapter, poll_cluster
from tasks.read_records import read_records
from tasks.topic_state import describe_topic_state
from tasks.urgency import read_urgency_all, read_urgency_task
from tasks.watching import observation_step, watch_cluster

# Every task module is imported here, so the worker (autodiscovery of
# ``tasks.celery_tasks``) registers every name ``groups.services.dispatch`` sends.
__all__ = ["poll_all_clusters", "poll_cluster_task", "poll_part_task", "ping", "watch_all_clusters", "watch_cluster_task", "recover_jobs", "run_connection_test",
           "read_records", "run_remediation_job", "send_notification", "count_missed_records_task",
           "validate_partitions", "run_expansion_job", "recover_expansions", "read_urgency_all", "read_urgency_task",
           "describe_topic_state"]

log = logging.getLogger(__name__)


@shared_task(name="gapwatch.ping")
def ping(payload: str) -> str:
    """Round trip through the broker and the result backend; used by health checks and tests."""
    return f"pong:{payload}"


@shared_task(name="gapwatch.poll_all_clusters", ignore_result=True)
def poll_all_clusters() -> None:
    for cluster_id in cluster_ids_enabled():
        poll_cluster_task.apply_async((cluster_id,), expires=settings.POLL_INTERVAL_SECONDS)


def poll_lock_key(cluster_id: int) -> str:
    return f"gapwatch:poll-lock:{cluster_id}"


@shared_task(name="gapwatch.poll_cluster")
def poll_cluster_task(cluster_id: int) -> dict:
    """Poll one cluster under a Redis lock: no two polls of one cluster overlap,
    and a dead worker's lock expires after POLL_LOCK_SECONDS.

    While a group owns a new partition without a first commit, poll again after
    FAST_POLL_SECONDS, to catch that first commit (the evidence of its policy).
    """
    # The watcher's ticks hold the same lock for a moment every second: wait that out.
    with redis_lock(poll_lock_key(cluster_id), timeout=settings.POLL_LOCK_SECONDS,
                    wait=2 * settings.WATCH_INTERVAL_SECONDS + 1) as held:
        if not held:
            cluster_record_skipped_poll(cluster_id=cluster_id)  # counted and shown, never silent
            return {"cluster_id": cluster_id, "skipped": "a poll of this cluster is already running"}
        summary = poll_cluster(cluster_id=cluster_id)
    if summary.groups_to_watch:
        poll_cluster_task.apply_async((cluster_id,), countdown=settings.FAST_POLL_SECONDS)
    if summary.ok:
        reset_jobs_retry_waiting(cluster_id=cluster_id)  # a group may be Empty now
        if findings_to_count(cluster_id=cluster_id, limit=1):
            count_missed_records_task.delay(cluster_id)
    return summary.as_dict()


@shared_task(name="gapwatch.count_missed_records", ignore_result=True)
def count_missed_records_task(cluster_id: int) -> int:
    """Count the records of decided findings' ranges (offsets are not records
    once transactions put markers and aborted records in them), one counter
    per cluster at a time, for at most a minute (or a poll interval, if longer):
    each range costs about a second; what is left waits for the next poll's call."""
    seconds = max(60, settings.POLL_INTERVAL_SECONDS)
    with redis_lock(f"gapwatch:count-records:{cluster_id}", timeout=2 * seconds + 60) as held:
        if not held:
            return 0  # another worker counts this cluster now
        return count_missed_records(cluster_id=cluster_id, seconds=seconds)


@shared_task(name=PART_TASK, ignore_result=True, acks_late=False)
def poll_part_task(cluster_id: int, kind: str, key: str, payload: dict) -> bool:
    """One part of a split poll (tasks.poll_parts), for the worker whose poll
    sent it. Acknowledged on arrival: a part whose worker dies is read again
    by the poll's own worker, never redelivered."""
    return answer_part(cluster_id=cluster_id, kind=kind, key=key, payload=payload, adapter_for=cluster_adapter,
                       forget=forget_adapter)


@shared_task(name="gapwatch.watch_all_clusters", ignore_result=True)
def watch_all_clusters() -> None:
    for cluster_id in cluster_ids_enabled():
        watch_cluster_task.apply_async((cluster_id,), expires=settings.WATCH_INTERVAL_SECONDS)


@shared_task(name="gapwatch.watch_cluster", ignore_result=True)
def watch_cluster_task(cluster_id: int) -> dict:
    """One watcher tick (tasks/watching.py) under the poll's lock. While a poll
    or another tick of this cluster holds it, the tick waits at most one
    observation step (a short poll or a tick ending on time), then skips: a
    skipped tick would leave a whole interval of a pickup unobserved. Its
    observations are scheduled from its arrival, so waiting never pushes the
    next tick's out."""
    arrived, arrived_at = time.monotonic(), time.time()
    with redis_lock(poll_lock_key(cluster_id), timeout=settings.POLL_LOCK_SECONDS, wait=observation_step()) as held:
        if not watch_cluster_task.request.called_directly:  # the pulse counts beat's ticks, not a job's own
            tick_record(cluster_id=cluster_id, arrived=arrived_at, ran=held)
        if not held:
            return {"cluster_id": cluster_id, "skipped": "a poll of this cluster is running"}
        return watch_cluster(cluster_id=cluster_id, started=arrived)


@shared_task(name="gapwatch.recover_jobs", ignore_result=True)
def recover_jobs() -> list[int]:
    """Enqueue again the jobs whose executor is gone, and return their ids:

    - ``running`` with the job's advisory lock free: its worker died mid-job
      (a SIGKILL, an OOM kill); the executor restarts it from live state;
    - ``approved`` or ``queued`` untouched for JOB_STALL_SECONDS: its message
      went down with a killed worker, and Redis would hand it out again only
      after the visibility timeout (hours). Touching ``updated_at`` spaces the
      next try by another JOB_STALL_SECONDS.

    A job enqueued twice runs once: statuses move by compare-and-set and
    executors hold the job's lock.
    """
    stalled_since = timezone.now() - timedelta(seconds=settings.JOB_STALL_SECONDS)
    running = [job_id for job_id in job_ids_running() if job_lock_free(job_id)]
    stalled = job_ids_stalled(untouched_since=stalled_since)
    jobs_touch_stalled(job_ids=stalled)
    for job_id in running + stalled:
        log.warning("job %s has no live executor; enqueued again", job_id)
        run_remediation_job.delay(job_id)
    return running + stalled


@shared_task(name="gapwatch.run_remediation_job", acks_late=True, reject_on_worker_lost=True)
def run_remediation_job(job_id: int) -> str:
    """Move an approved job to ``queued`` (compare-and-set: a repeated message
    is harmless) and hand it to the executor of its kind."""
    job_transition(job_id=job_id, from_statuses=[RemediationJob.Status.APPROVED],
                   to_status=RemediationJob.Status.QUEUED)
    kind = job_kind(job_id=job_id)
    executor = EXECUTORS.get(kind)
    if executor is None:
        job_note_unrunnable(
            job_id=job_id, reason=f"no executor for {kind} jobs is installed in this version; the job stays queued")
        return "no executor"
    return executor(job_id=job_id)


@shared_task(name="gapwatch.run_expansion_job", acks_late=True, reject_on_worker_lost=True)
def run_expansion_job(job_id: int, token: str | None = None) -> str:
    """One run of an approved expansion (tasks/expansion/run.py), watching
    its new partitions with this module's watcher tick; while it waits, the
    next run is this task again, one watcher interval later."""
    return run_expansion(job_id, tick=watch_cluster_task, token=token, again=_run_again)


def _run_again(job_id: int, token: str) -> None:
    run_expansion_job.apply_async((job_id, token), countdown=settings.WATCH_INTERVAL_SECONDS)


@shared_task(name="gapwatch.recover_expansions", ignore_result=True)
def recover_expansions(stalled_only: bool = True) -> list[int]:
    """Start a new chain of runs for every expansion whose chain died (beat;
    ``stalled_only`` False at a worker's start: every running job whose lock
    is free, since the messages of a worker that died with it may be held
    unacknowledged for hours; taking over a live chain only ends that chain)."""
    ids = expansions_to_resume(stalled_only=stalled_only)
    for job_id in ids:
        log.warning("expansion job %s has no live executor; resumed", job_id)
        run_expansion_job.delay(job_id)
    return ids


@worker_ready.connect
def _resume_expansions_on_start(sender=None, **_) -> None:
    """A worker that starts resumes what a dead one left running."""
    recover_expansions.delay(False)
