"""Loaded with ``-p tests.xdist_isolation`` (pyproject's addopts), before
pytest-django reads the settings: under pytest-xdist each worker gets a Redis
database of its own (REDIS_URL's database + the worker's number), so one
worker's Celery worker never takes another's tasks, and known-partition sets
and locks never meet. The test database is per worker already (pytest-django
suffixes it with the worker id); Kafka topics and groups carry unique names."""

from __future__ import annotations

import os
import re


def worker_redis_url(url: str, worker: str) -> str:
    """``url`` with its database moved up by the worker's number (``gw2``: +2);
    unchanged outside xdist (no worker id)."""
    if not worker.startswith("gw"):
        return url
    match = re.search(r"/(\d+)$", url)
    base = int(match.group(1)) if match else 0
    return re.sub(r"(/\d+)?$", f"/{base + int(worker[2:])}", url, count=1)


if os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], os.environ.get("PYTEST_XDIST_WORKER", ""))

