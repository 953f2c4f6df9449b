"""A topic as the broker holds it now, for its page (issue 44, item 6):
a worker reads the partitions (leaders, replicas, in-sync replicas, offsets,
sizes) and configs with the cluster's stored credentials, on demand, for
``groups.services.topic_state``. Nothing is stored."""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task

from groups.selectors.clusters import cluster_find
from tasks.cluster_client import ClusterUnreachable, cluster_client


@shared_task(name="gapwatch.describe_topic_state")
def describe_topic_state(cluster_id: int, topic: str) -> dict:
    """``{"partitions": [...], "configs": [...]}`` as plain data, or ``{"error": ...}`` (secrets redacted)."""
    try:
        with cluster_client(cluster_find(cluster_id=cluster_id)) as adapter:
            return {"partitions": [asdict(p) for p in adapter.topic_partitions(topic)],
                    "configs": [asdict(c) for c in adapter.topic_configs(topic)]}
    except ClusterUnreachable as error:
        return {"error": str(error)}
