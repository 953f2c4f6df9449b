"""Writes an executor makes while a job runs, beside the status moves of
``remediation.job_transition``: progress, attempts, a re-plan, a waiting job's
reason, a job nobody can run, and the audit rows of an applied reset and of a
backfill run from the command line. Each
touches only a job still in the status the executor holds (compare-and-set),
so a cancelled or finished job is never written behind its back."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from groups.domain.reasons import system_text
from groups.models import RemediationJob
from groups.services.audit import audit_record

Status = RemediationJob.Status


def jobs_touch_stalled(*, job_ids: Iterable[int]) -> None:
    """Approved or queued jobs enqueued again (``recover_jobs``): touching
    ``updated_at`` spaces their next recovery by another stall period."""
    RemediationJob.objects.filter(id__in=list(job_ids), status__in=[Status.APPROVED, Status.QUEUED]).update(
        updated_at=timezone.now())


def job_note_unrunnable(*, job_id: int, reason: str) -> None:
    """A queued job no installed executor can run stays queued, saying why."""
    RemediationJob.objects.filter(id=job_id, status=Status.QUEUED).update(status_reason=system_text(reason))


def job_record_progress(*, job_id: int, done: int, total: int) -> None:
    RemediationJob.objects.filter(id=job_id, status=Status.RUNNING).update(
        progress_done=done, progress_total=total, updated_at=timezone.now())


def job_record_stages(*, job_id: int, stages: list[dict]) -> None:
    """A running backfill's stages (``groups.domain.job_progress``), as its runner last saw them."""
    RemediationJob.objects.filter(id=job_id, status=Status.RUNNING).update(progress_stages=stages,
                                                                         updated_at=timezone.now())


def job_record_reason(*, job_id: int, reason: str) -> None:
    """What a running job is doing or waiting for, in words (its status stays)."""
    RemediationJob.objects.filter(id=job_id, status=Status.RUNNING).update(status_reason=system_text(reason),
                                                                         updated_at=timezone.now())


def job_record_result(*, job_id: int, result: dict, status: str = Status.RUNNING, **fields) -> None:
    """A running (or waiting) job's result so far: a backfill's attempts, a reset's checks."""
    RemediationJob.objects.filter(id=job_id, status=status).update(result=result, updated_at=timezone.now(),
                                                                     **fields)


def job_record_plan(*, job_id: int, plan: list[dict]) -> None:
    """The plan a running reset re-made from live offsets, stored before it is applied."""
    RemediationJob.objects.filter(id=job_id, status=Status.RUNNING).update(plan=plan, updated_at=timezone.now())


def reset_record_applied(*, job: RemediationJob, group_id: str, target: dict, rows: list[dict],
                         verified: bool) -> None:
    """The audit row of offsets committed by a reset, with what was read back."""
    audit_record(
        action="offsets.reset", actor=None, cluster=job.cluster, object_type="job", object_id=job.id,
        detail={"group": group_id, "via": job.params.get("source", "dashboard"), "target": target,
                "partitions": rows, "verified": verified},
    )


def backfill_record_cli_run(*, cluster, run_id: str, sink: str, outcome: str, ranges: list[dict],
                            result: dict) -> None:
    """The audit row of a backfill run from the command line (it has no job row)."""
    audit_record(action="backfill.cli", actor=None, cluster=cluster, object_type="backfill", object_id=run_id[:40],
                 detail={"via": "cli", "run_id": run_id, "sink": sink, "outcome": outcome, "ranges": ranges,
                         "delivered": result.get("delivered"), "expected": result.get("expected")})


# One lock for the count of running backfills: two launches never both take the last slot.
BACKFILL_SLOTS_LOCK = (0x6266, 2**31 - 1)
BACKFILL_STARTING = "starting the Spark job"


def backfill_take_slot(*, job_id: int, slots: int) -> str:
    """Whether the backfill's driver may start (``tasks.backfill.driver``):
    "launch" for a ``queued`` job moved to ``running`` while fewer than
    ``slots`` backfills run, and for a ``running`` one (its driver died: it
    keeps its slot); "waiting" for a ``queued`` job when every slot is taken
    (its reason says so); otherwise the job's status, left alone. Counted and
    moved under one transaction-scoped advisory lock."""
    from django.db import connection, transaction

    from groups.services.remediation import job_transition

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("select pg_advisory_xact_lock(%s, %s)", BACKFILL_SLOTS_LOCK)
        job = RemediationJob.objects.select_for_update().get(id=job_id)
        if job.status == Status.RUNNING:
            return "launch"
        if job.status != Status.QUEUED:
            return job.status
        running = RemediationJob.objects.filter(kind=RemediationJob.Kind.BACKFILL, status=Status.RUNNING).count()
        if running >= slots:
            reason = (f"waiting for a Spark slot: {running} backfill(s) running, at most {slots} at once "
                      "(BACKFILL_DRIVERS)")
            if job.status_reason != reason:
                RemediationJob.objects.filter(id=job_id).update(status_reason=reason)
            return "waiting"
        job_transition(job_id=job_id, from_statuses=[Status.QUEUED], to_status=Status.RUNNING,
                       status_reason=BACKFILL_STARTING, error="", progress_done=0)
        return "launch"
