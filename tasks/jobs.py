"""Celery tasks. Thin: they take ids, load objects and call services."""

from celery import shared_task


@shared_task(name="gapwatch.ping")
def ping(payload: str) -> str:
    """Round trip through the broker and the result backend; used by health checks and tests."""
    return f"pong:{payload}"
