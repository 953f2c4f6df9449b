"""Loaded with ``-p tests.xdist_isolation`` (pyproject's addopts), before
pytest-django reads the settings: under pytest-xdist each worker gets a Redis
database of its own (REDIS_URL's database + the worker's number), so one
worker's Celery worker never takes another's tasks, and known-partition sets
and locks never meet. The test database is per worker already (pytest-django
suffixes it with the worker id); Kafka topics and groups carry unique names."""

from __future__ import annotations

import os
import re

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    _url = os.environ["REDIS_URL"]
    _match = re.search(r"/(\d+)$", _url)
    _base = int(_match.group(1)) if _match else 0
    os.environ["REDIS_URL"] = re.sub(r"(/\d+)?$", f"/{_base + int(_worker[2:])}", _url, count=1)
