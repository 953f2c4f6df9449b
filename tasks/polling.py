"""One poll of one cluster: observe with the adapter, then let the services
write. Used by the Celery task and by `manage.py poll_now`."""

from __future__ import annotations

import time

from django.conf import settings
from django.utils import timezone

from groups.models import Cluster
from groups.services.polls import PollSummary, cluster_record_failure, poll_record_success
from tasks.kafka.adapter import KafkaAdapter, KafkaUnavailable


def poll_cluster(*, cluster_id: int) -> PollSummary:
    cluster = Cluster.objects.get(id=cluster_id)
    adapter = KafkaAdapter(
        cluster.client_config(), timeout=settings.KAFKA_TIMEOUT_SECONDS, max_in_flight=settings.KAFKA_MAX_IN_FLIGHT
    )
    started = time.monotonic()
    try:
        snapshot = adapter.snapshot(cluster=cluster.name, now=timezone.now())
    except KafkaUnavailable as error:
        return cluster_record_failure(
            cluster_id=cluster.id, error=str(error), now=timezone.now(), kafka_seconds=time.monotonic() - started
        )
    return poll_record_success(
        cluster_id=cluster.id, snapshot=snapshot, now=snapshot.taken_at, kafka_seconds=time.monotonic() - started
    )
