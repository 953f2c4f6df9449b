"""A backfill's driver: the process that runs one backfill job
(``tasks.backfill.executor.execute_backfill``) outside every Celery worker.

A backfill waits for most of its life (on open transactions, on its Spark
job); a Celery worker that ran it would be held for all of that. So the jobs
worker only launches it (``backfill_launch``) and returns at once:

1. ``groups.services.jobs.backfill_take_slot``: a ``queued`` job moves to
   ``running`` when fewer than BACKFILL_DRIVERS backfills run, and stays
   ``queued``, saying why, otherwise; a ``running`` job (its driver died:
   ``recover_jobs`` found its lock free) keeps its slot.
2. After commit: ``python -m tasks.backfill.drive <job id>`` in a session of
   its own, so a worker killed or restarted meanwhile changes nothing. It
   gets this process's settings for backfills on its standard input (a pipe:
   the Spark Connect token never reaches a file or an argument list) and
   the database this process uses in its environment. It runs at
   BACKFILL_NICENESS (its Spark job process too): batch work yields the CPU
   to the watch.
3. The driver takes the job's advisory lock (``tasks.job_lock``) and runs
   it; a second driver of the same job finds the lock taken and ends. When
   it ends, the backfills waiting for a slot are enqueued again.

A driver killed (SIGKILL, out of memory) releases the lock with its
connection: ``recover_jobs`` (every JOB_RECOVERY_SECONDS) launches the job
again, and the executor restarts it from what its attempts recorded.
BACKFILL_DRIVER=worker runs the executor inside the worker instead, as
before (the tests that patch the runner in their own process use it).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

from groups.selectors.jobs import backfills_waiting
from groups.services.jobs import backfill_take_slot

log = logging.getLogger(__name__)
BASE_DIR = Path(__file__).resolve().parents[2]
# The settings a driver takes from the process that launched it, as they are there.
DRIVER_SETTINGS = (
    "BACKFILL_OUTPUT", "BACKFILL_TIMEOUT_SECONDS", "BACKFILL_KAFKA_TIMEOUT_SECONDS",
    "BACKFILL_TRANSACTION_WAIT_SECONDS", "BACKFILL_HANDLERS", "SPARK_MASTER", "SPARK_CONNECT_URL",
    "SPARK_CONNECT_TOKEN", "SPARK_KAFKA_JARS_DIR", "KAFKA_TIMEOUT_SECONDS",
)
# Drivers this process started, polled at each launch so that none stays a zombie.
_started: list[subprocess.Popen] = []


def backfill_launch(*, job_id: int) -> str:
    """Launch the job's driver if it has a slot (steps 1 and 2 above); what happened, in words."""
    for process in list(_started):
        if process.poll() is not None:
            _started.remove(process)
    taken = backfill_take_slot(job_id=job_id, slots=settings.BACKFILL_DRIVERS)
    if taken != "launch":
        return "waiting for a slot" if taken == "waiting" else taken
    _spawn(job_id)
    return "launched"


def _spawn(job_id: int) -> None:
    environment = {**os.environ, "DATABASE_URL": _database_url(),
                   "PYTHONPATH": os.pathsep.join(p for p in (str(BASE_DIR), os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tasks.backfill.drive", str(job_id)], cwd=BASE_DIR, env=environment,
        stdin=subprocess.PIPE, start_new_session=True,
    )
    with process.stdin:
        process.stdin.write(json.dumps(_driver_settings()).encode())
    _started.append(process)
    log.info("backfill job %s: driver started as process %s", job_id, process.pid)


def _driver_settings() -> dict:
    return {name: (str(value) if isinstance(value, Path) else value)
            for name in DRIVER_SETTINGS if (value := getattr(settings, name, None)) is not None}


def _database_url() -> str:
    """The database this process uses (a test database has a name of its own)."""
    from urllib.parse import quote

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else "")
    return f"postgresql://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{quote(db['NAME'], safe='')}"


def main(argv: list[str]) -> int:
    job_id = int(argv[1])
    os.nice(min(19, settings.BACKFILL_NICENESS))  # its Spark process inherits it
    for name, value in json.loads(sys.stdin.read() or "{}").items():
        setattr(settings, name, tuple(value) if isinstance(value, list) else value)
    from celery import current_app  # configured: the settings' package loads the app

    from groups.services.dispatch import RUN_REMEDIATION_JOB
    from tasks.backfill.executor import execute_backfill

    try:
        status = execute_backfill(job_id=job_id, launched=True)
        log.info("backfill job %s: %s", job_id, status)
    finally:
        for waiting in backfills_waiting():
            current_app.send_task(RUN_REMEDIATION_JOB, (waiting,))
    return 0

