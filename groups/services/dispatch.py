"""How services start background work: a Celery task enqueued by its name
once the current transaction commits.

``groups`` never imports ``tasks`` (the tasks import the services), so work
is named here, not imported; ``tests/unit/test_dispatch.py`` checks that every
name below is a registered task. Enqueued after commit, a task never reads a
row its caller has not committed yet, and a rolled-back request starts nothing.
"""

from __future__ import annotations

from celery import current_app
from celery.exceptions import TimeoutError as CeleryTimeout
from django.db import transaction

RUN_REMEDIATION_JOB = "gapwatch.run_remediation_job"
SEND_NOTIFICATION = "gapwatch.send_notification"
TEST_CONNECTION = "gapwatch.test_connection"
READ_RECORDS = "gapwatch.read_records"
VALIDATE_PARTITIONS = "gapwatch.validate_partitions"
RUN_EXPANSION_JOB = "gapwatch.run_expansion_job"
DESCRIBE_TOPIC_STATE = "gapwatch.describe_topic_state"
TASK_NAMES = (RUN_REMEDIATION_JOB, SEND_NOTIFICATION, TEST_CONNECTION, READ_RECORDS, VALIDATE_PARTITIONS,
              RUN_EXPANSION_JOB, DESCRIBE_TOPIC_STATE)


class QueueUnavailable(Exception):
    """The task queue (Redis) does not answer, so work that needs it is refused
    before anything is written."""


def queue_check(*, timeout: float = 2.0) -> None:
    """Raise QueueUnavailable unless the task queue answers within ``timeout``."""
    try:
        with current_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as error:  # noqa: BLE001 - any transport error means the same to the caller
        raise QueueUnavailable(
            f"the task queue (Redis) does not answer ({type(error).__name__}); nothing was created: "
            "try again once it is back"
        ) from None


class TaskTimedOut(Exception):
    """A task whose answer a request waits for did not answer in time."""


def task_answer(*, name: str, args: tuple, timeout: float) -> object:
    """Send task ``name`` now and wait up to ``timeout`` seconds for its
    return value, which is then deleted from the result backend. For the
    rare request that needs a worker's answer on the page (the record
    viewer, an expansion's plan, a topic on the broker); raises QueueUnavailable or TaskTimedOut."""
    if name not in TASK_NAMES:
        raise ValueError(f"unknown task {name!r}")
    queue_check()
    result = current_app.send_task(name, args=args)
    try:
        return result.get(timeout=timeout, propagate=True)
    except CeleryTimeout:
        raise TaskTimedOut(f"no worker answered within {timeout:g} s; try again") from None
    finally:
        result.forget()


def task_enqueue_on_commit(name: str, *args: object) -> None:
    """Send task ``name`` with ``args`` after the current transaction commits
    (at once when none is open). Should the queue fail between a caller's
    ``queue_check`` and the commit, the send is logged, not raised: the rows
    are committed, and job recovery (``gapwatch.recover_jobs``) enqueues a
    stalled job again."""
    if name not in TASK_NAMES:
        raise ValueError(f"unknown task {name!r}")
    transaction.on_commit(lambda: current_app.send_task(name, args=args), robust=True)
