"""One PostgreSQL advisory lock per remediation job, held while an executor
works on it. PostgreSQL releases it when the holder's connection ends, so a
worker killed mid-job never keeps it, and a free lock on a ``running`` job
means its executor is gone (``job_lock_free``, used by job recovery)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

log = logging.getLogger(__name__)
LOCK_NAMESPACE = 0x6266
# Expansion jobs (tasks/expansion/run.py) number their own rows: their locks live apart.
EXPANSION_NAMESPACE = 0x6578


def _key(job_id: int, namespace: int = LOCK_NAMESPACE) -> tuple[int, int]:
    return (namespace, job_id % 2**31)


@contextmanager
def job_lock(job_id: int, namespace: int = LOCK_NAMESPACE) -> Iterator[bool]:
    """Yield True while this connection holds the job's lock, False if another does."""
    with connection.cursor() as cursor:
        cursor.execute("select pg_try_advisory_lock(%s, %s)", _key(job_id, namespace))
        locked = bool(cursor.fetchone()[0])
    try:
        yield locked
    finally:
        if locked:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("select pg_advisory_unlock(%s, %s)", _key(job_id, namespace))
            except Exception:  # noqa: BLE001 - a lost connection released it already
                log.warning("could not release the lock of job %s", job_id, exc_info=True)


def job_lock_free(job_id: int, namespace: int = LOCK_NAMESPACE) -> bool:
    """True when no executor holds the job's lock (asked without keeping it)."""
    with job_lock(job_id, namespace) as locked:
        return locked
