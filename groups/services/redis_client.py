"""The one way Gapwatch's processes reach Redis (``settings.REDIS_URL``,
with the timeouts said here), and the lock pattern of the poll, the watcher
and the record counter. A client per call, as before: a pooled connection
would outlive a Redis restart and fail its next command once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings

log = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECONDS = 5.0


def redis_client(*, timeout: float | None = SOCKET_TIMEOUT_SECONDS) -> redis.Redis:
    """A client of REDIS_URL whose every call, connecting too, gives up after
    ``timeout`` seconds; None: no limit, for a command that blocks on purpose
    and carries its own (a poll part's BLPOP)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout)


@contextmanager
def redis_lock(name: str, *, timeout: float, wait: float | None = None) -> Iterator[bool]:
    """Yield whether this process holds the lock ``name`` (for at most
    ``timeout`` seconds: a dead holder's lock expires), waiting up to
    ``wait`` seconds for it (None: not at all). A lock that expired before
    its holder was done is logged, not raised: the work stands."""
    lock = redis_client().lock(name, timeout=timeout)
    held = lock.acquire(blocking=wait is not None, blocking_timeout=wait)
    try:
        yield held
    finally:
        if held:
            try:
                lock.release()
            except redis.exceptions.LockError:
                log.warning("the lock %s expired before its holder was done", name)
