"""A topic as the broker holds it now, for its page (issue 44, item 6):
a worker reads the partitions (leaders, replicas, in-sync replicas, offsets,
sizes) and configs with the cluster's stored credentials, on demand, for
``groups.services.topic_state``. Nothing is stored."""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task
from django.conf import settings

from groups.crypto import SecretUnreadable
from groups.domain.secrets import secret_redact
from groups.selectors.clusters import cluster_find
from tasks.kafka import KafkaAdapter, KafkaUnavailable


@shared_task(name="gapwatch.describe_topic_state")
def describe_topic_state(cluster_id: int, topic: str) -> dict:
    """``{"partitions": [...], "configs": [...]}`` as plain data, or ``{"error": ...}`` (secrets redacted)."""
    cluster = cluster_find(cluster_id=cluster_id)
    secrets: tuple[str, ...] = ()
    try:
        if cluster is None:
            raise LookupError("the cluster no longer exists")
        config = cluster.client_config()
        secrets = config.secrets
        adapter = KafkaAdapter(config, timeout=settings.KAFKA_TIMEOUT_SECONDS)
        return {"partitions": [asdict(p) for p in adapter.topic_partitions(topic)],
                "configs": [asdict(c) for c in adapter.topic_configs(topic)]}
    except (LookupError, SecretUnreadable, KafkaUnavailable) as error:
        return {"error": secret_redact(str(error), *secrets)}
