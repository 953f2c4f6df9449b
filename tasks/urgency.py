"""How urgent open findings are: a worker reads, per open finding, the
topic's retention configs and the first record still stored at or after the
missed range's start, and stores them (``groups.services.urgency``), every
URGENCY_INTERVAL_SECONDS by beat. Stored, not read when a page renders: the
triage sorts every open finding by it, and pages read stored state only."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from groups.crypto import SecretUnreadable
from groups.domain.secrets import secret_redact
from groups.selectors.clusters import cluster_find, cluster_ids_enabled
from groups.selectors.finding import findings_for_urgency
from groups.services.lifecycle import missed_range_of
from groups.services.redis_client import redis_lock
from groups.services.urgency import finding_urgency_failed, finding_urgency_record
from adapters.kafka import KafkaUnavailable
from tasks.cluster_client import kafka_client

log = logging.getLogger(__name__)


def read_urgency(*, cluster_id: int, seconds: float) -> int:
    """Read the urgency of the cluster's open findings, those read longest
    ago first, for at most ``seconds``; returns how many were stored. A
    topic's configs are read once a run; a finding whose read fails is
    stored with the reason (its last values kept)."""
    cluster = cluster_find(cluster_id=cluster_id)
    if cluster is None:
        return 0
    deadline, stored, secrets = time.monotonic() + seconds, 0, ()
    retentions: dict[str, tuple] = {}
    try:
        config = cluster.cluster_config()
        secrets = config.secrets
        adapter = kafka_client(config)
    except SecretUnreadable as error:
        log.warning("urgency of cluster %s not read: %s", cluster_id, error)
        return 0
    for finding in findings_for_urgency(cluster_id=cluster_id):
        if time.monotonic() > deadline:
            break
        topic = finding.topic.name
        try:
            if topic not in retentions:
                retentions[topic] = adapter.topic_retention(topic)
            retention, timestamp_type = retentions[topic]
            record = adapter.first_record(topic=topic, partition=finding.partition,
                                          start=missed_range_of(finding).start,
                                          deadline=min(deadline, time.monotonic() + settings.KAFKA_TIMEOUT_SECONDS))
        except KafkaUnavailable as error:
            finding_urgency_failed(finding_id=finding.id, error=secret_redact(str(error), *secrets),
                                   now=timezone.now())
            continue
        first_timestamp = (datetime.fromtimestamp(record.timestamp_ms / 1000, UTC)
                           if record is not None and record.timestamp_ms is not None else None)
        finding_urgency_record(finding_id=finding.id, retention=retention, timestamp_type=timestamp_type,
                               first_offset=record.offset if record is not None else None,
                               first_timestamp=first_timestamp, now=timezone.now())
        stored += 1
    return stored


@shared_task(name="gapwatch.read_urgency_all", ignore_result=True)
def read_urgency_all() -> None:
    for cluster_id in cluster_ids_enabled():
        read_urgency_task.apply_async((cluster_id,), expires=settings.URGENCY_INTERVAL_SECONDS)


@shared_task(name="gapwatch.read_urgency", ignore_result=True)
def read_urgency_task(cluster_id: int) -> int:
    """One reader a cluster at a time, for at most a minute a run."""
    with redis_lock(f"gapwatch:read-urgency:{cluster_id}", timeout=180) as held:
        if not held:
            return 0
        return read_urgency(cluster_id=cluster_id, seconds=60)
