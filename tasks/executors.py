"""Which function executes a job of each kind: ``executor(job_id=...) -> str``.

An executor moves the job with ``groups.services.remediation.job_transition`` (queued or
waiting -> running -> succeeded/failed/waiting) and records plan, progress and
result on the job. Kinds without an executor stay ``queued``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from tasks.backfill.driver import backfill_launch
from tasks.backfill.executor import execute_backfill
from tasks.offset_reset import execute_reset


def run_backfill(*, job_id: int) -> str:
    """A backfill runs in a driver process of its own (``tasks.backfill.driver``),
    launched from here without waiting; BACKFILL_DRIVER=worker runs it in this worker."""
    if settings.BACKFILL_DRIVER == "worker":
        return execute_backfill(job_id=job_id)
    return backfill_launch(job_id=job_id)


EXECUTORS: dict[str, Callable[..., str]] = {"reset": execute_reset, "backfill": run_backfill}
