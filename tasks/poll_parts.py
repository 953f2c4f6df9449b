"""A split poll (``POLL_SPLIT_PARTITIONS``): the parts of one stage of a full
poll, read by several Celery workers at once.

The worker that took the poll (it holds the cluster's poll lock: still one
poll at a time) sends every part but the first as a ``gapwatch.poll_part``
task, reads the first itself, then collects the others. Each part is claimed
once in Redis (``SET NX``): by a worker that takes its task, or by the poll's
own worker when no other worker has taken it yet, so a poll never waits on a
queue and never deadlocks on busy workers; with no other worker it reads every
part itself, as an unsplit poll would. A part claimed by a worker that does
not answer within ``part_wait`` (killed, stuck) is read again by the poll's
worker: parts only read, so reading one twice is harmless.

Parts answer through Redis, never the database: only the poll's worker writes,
once, after every part has answered. A worker killed mid-part costs the poll
its wait; the poll's own worker killed leaves nothing written, and its lock
expires (``POLL_LOCK_SECONDS``).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from celery import current_app
from django.conf import settings

from groups.models import Cluster
from groups.selectors.clusters import cluster_get
from groups.services.redis_client import redis_client
from adapters.kafka import KafkaAdapter, KafkaUnavailable
from adapters.kafka.parts import GROUPS, WATERMARKS, error_out

log = logging.getLogger(__name__)
PART_TASK = "gapwatch.poll_part"
_KEY_PREFIX = "gapwatch:poll-part"


def split_parts(total_partitions: int) -> int:
    """How many parts a full poll of a cluster of ``total_partitions`` is read
    in: ``POLL_PARTS`` from ``POLL_SPLIT_PARTITIONS`` on, else 1 (unsplit)."""
    threshold = settings.POLL_SPLIT_PARTITIONS
    return settings.POLL_PARTS if threshold and total_partitions >= threshold else 1


def part_wait_default() -> float:
    """How long a poll waits for a part another worker took: a part reads for
    at most about two request timeouts (a stage's retries end at one)."""
    return 2 * settings.KAFKA_TIMEOUT_SECONDS + 5


def _claim_seconds(wait: float) -> int:
    """How long a part's claim and answer live in Redis: past any late task or answer of its poll."""
    return int(4 * wait) + 60


def read_part(adapter: KafkaAdapter, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One part's answer, or its error as an answer (raised again by the poll's snapshot)."""
    read: Callable[[dict[str, Any]], dict[str, Any]] = {
        WATERMARKS: adapter.read_watermarks_part, GROUPS: adapter.read_groups_part}[kind]
    try:
        return read(payload)
    except KafkaUnavailable as error:
        return error_out(error)


class CeleryParts:
    """``PollParts`` over Celery workers and Redis, for one poll of ``cluster_id``."""

    def __init__(self, *, cluster_id: int, adapter: KafkaAdapter, part_wait: float | None = None) -> None:
        self.cluster_id = cluster_id
        self.adapter = adapter
        self.redis = redis_client(timeout=None)
        self.part_wait = part_wait if part_wait is not None else part_wait_default()
        # Which parts other workers answered, for the poll's summary and the tests.
        self.answered_elsewhere = 0
        self.read_here = 0
        self.retaken = 0  # of those read here, claimed by a worker that did not answer

    def run(self, kind: str, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        poll = f"{_KEY_PREFIX}:{self.cluster_id}:{uuid.uuid4().hex}:{kind}"
        ttl = _claim_seconds(self.part_wait)
        for index, payload in enumerate(payloads[1:], start=1):
            current_app.send_task(PART_TASK, (self.cluster_id, kind, f"{poll}:{index}", payload),
                                  expires=self.part_wait, ignore_result=True)
        answers: list[dict[str, Any]] = []
        try:
            for index, payload in enumerate(payloads):
                key = f"{poll}:{index}"
                if self.redis.set(f"{key}:claim", "poll", nx=True, ex=ttl):
                    answers.append(self._here(kind, payload))
                    continue
                answer = self.redis.blpop([f"{key}:answer"], timeout=self.part_wait)
                if answer is None:
                    log.warning("part %s of the %s read of cluster %s was taken by a worker that did not answer "
                                "within %gs: read again here", index, kind, self.cluster_id, self.part_wait)
                    self.retaken += 1
                    answers.append(self._here(kind, payload))
                    continue
                self.answered_elsewhere += 1
                answers.append(json.loads(answer[1]))
        finally:
            # The claims stay until they expire: a part's task that arrives late finds its part taken.
            self.redis.delete(*[f"{poll}:{index}:answer" for index in range(len(payloads))])
        return answers

    def _here(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.read_here += 1
        return read_part(self.adapter, kind, payload)


def answer_part(*, cluster_id: int, kind: str, key: str, payload: dict[str, Any],
                adapter_for: Callable[[Cluster], AbstractContextManager[KafkaAdapter]],
                forget: Callable[[int], None]) -> bool:
    """The ``gapwatch.poll_part`` task's work: claim the part (False when the
    poll's worker or another worker has it), read it, answer through Redis.
    A failed read drops the worker's client (``forget``), as a failed poll does."""
    client = redis_client(timeout=None)
    ttl = _claim_seconds(part_wait_default())
    if not client.set(f"{key}:claim", "worker", nx=True, ex=ttl):
        return False
    started = time.monotonic()
    with adapter_for(cluster_get(cluster_id=cluster_id)) as adapter:
        answer = read_part(adapter, kind, payload)
    if "error" in answer:
        forget(cluster_id)
    pipe = client.pipeline()
    pipe.rpush(f"{key}:answer", json.dumps(answer))
    pipe.expire(f"{key}:answer", ttl)
    pipe.execute()
    log.info("answered %s in %.2fs", key, time.monotonic() - started)
    return True
