"""Real Celery worker processes of a fault test's own, on the test's database
and Redis, that the test can freeze (SIGSTOP) and kill (SIGKILL, with their
whole process group, as a container kill or the OOM killer would)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a worker on the test's database (the test's Redis
    comes from the test's own environment, ``make test``'s)."""
    db = connection.settings_dict
    return {
        **os.environ,
        "DATABASE_URL": f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SPARK_CONNECT_URL": "", "POLL_INTERVAL_SECONDS": "3600", "DB_CONN_MAX_AGE": "0",
        # A backfill inside the worker (the tests that kill a worker mid-backfill); the tests of
        # drivers (tasks/backfill/driver.py) ask for "process".
        "BACKFILL_DRIVER": "worker", **extra,
    }


def empty_queues() -> None:
    """Drop every message waiting in this xdist worker's Celery queues, before
    a test starts workers of its own. The tests before it share its Redis
    database (tests/xdist_isolation.py) and leave messages there: jobs
    approved with no worker running, polls and watcher ticks of every cluster
    sent by a beat stopped before its workers. A worker runs those first, on
    the test's own clusters: one with a single slot was held for
    KAFKA_TIMEOUT_SECONDS (60 s) by a poll of a cluster whose broker the test
    had frozen, before it took the test's job."""
    from controlplane.celery import app

    app.control.purge()


def start_celery(args: list[str], env: dict, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "controlplane", *args], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_celery(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGCONT)  # a frozen worker cannot end on SIGTERM
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
