"""The record viewer's read: the first and last records of a missed range,
read by a worker with the cluster's stored credentials, for one approver's
request (``groups.services.record_viewer``).

The records never rest anywhere in clear: the task returns them encrypted
with the one-time key the request made (Fernet), so what sits in the result
backend until the page takes it, and what Celery logs of a task's return
value, is ciphertext; the page deletes the result once read.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from celery import shared_task
from cryptography.fernet import Fernet
from django.conf import settings

from groups.domain.record_display import record_slices, shown_bytes
from groups.selectors.clusters import cluster_find
from tasks.cluster_client import ClusterUnreachable, cluster_client


def _shown(record) -> dict:
    return {
        "offset": record.offset,
        "timestamp": (datetime.fromtimestamp(record.timestamp_ms / 1000, UTC).isoformat()
                      if record.timestamp_ms is not None else None),
        "timestamp_type": record.timestamp_type,
        "key": shown_bytes(record.key), "value": shown_bytes(record.value),
        "headers": [{"name": name, "value": shown_bytes(value)} for name, value in record.headers],
    }


@shared_task(name="gapwatch.read_records")
def read_records(cluster_id: int, topic: str, partition: int, start: int, end: int, count: int, key: str) -> str:
    """The first and last ``count`` records of ``[start, end)``, as JSON
    encrypted with ``key``: ``{"records": [...]}`` or ``{"error": ...}``."""
    try:
        with cluster_client(cluster_find(cluster_id=cluster_id)) as adapter:
            raw = adapter.read_records(topic=topic, partition=partition,
                                       ranges=record_slices(start=start, end=end, count=count),
                                       deadline=time.monotonic() + 2 * settings.KAFKA_TIMEOUT_SECONDS)
        answer: dict = {"records": [_shown(record) for record in raw]}
    except ClusterUnreachable as error:
        answer = {"error": str(error)}
    return Fernet(key.encode()).encrypt(json.dumps(answer).encode()).decode()
