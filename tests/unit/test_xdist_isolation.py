"""Each pytest-xdist worker's own Redis database (tests/xdist_isolation.py)."""

from __future__ import annotations

import pytest

from tests.xdist_isolation import worker_redis_url


@pytest.mark.parametrize("url, worker, expected, why", [
    ("redis://127.0.0.1:6379/1", "", "redis://127.0.0.1:6379/1", "no xdist: the URL as given"),
    ("redis://127.0.0.1:6379/1", "gw0", "redis://127.0.0.1:6379/1", "the first worker keeps the base database"),
    ("redis://127.0.0.1:6379/1", "gw2", "redis://127.0.0.1:6379/3", "the third worker: base + 2"),
    ("redis://127.0.0.1:6379", "gw1", "redis://127.0.0.1:6379/1", "no database in the URL counts as 0"),
    ("redis://127.0.0.1:6379/10", "gw3", "redis://127.0.0.1:6379/13", "a two-digit base"),
])
def test_each_worker_gets_a_redis_database_of_its_own(url, worker, expected, why):
    assert worker_redis_url(url, worker) == expected, why
