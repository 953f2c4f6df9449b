"""Which function executes a job of each kind: ``executor(job_id=...) -> str``.

An executor moves the job with ``groups.services.remediation.job_transition`` (queued or
waiting -> running -> succeeded/failed/waiting) and records plan, progress and
result on the job. Kinds without an executor stay ``queued``.
"""

from __future__ import annotations

from collections.abc import Callable

from tasks.backfill.executor import execute_backfill
from tasks.offset_reset import execute_reset

EXECUTORS: dict[str, Callable[..., str]] = {"reset": execute_reset, "backfill": execute_backfill}
