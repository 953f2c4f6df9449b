""""Test connection" of a cluster: ask it for its metadata, record the answer
on the cluster (and in the audit trail), never the password."""

from __future__ import annotations

from celery import shared_task

from groups.selectors.clusters import cluster_find
from groups.services.clusters import cluster_record_test
from tasks.cluster_client import ClusterUnreachable, cluster_client


@shared_task(name="gapwatch.test_connection")
def run_connection_test(cluster_id: int) -> dict:
    """Ping the cluster with the stored settings; record and return ``ok`` and ``message``."""
    cluster = cluster_find(cluster_id=cluster_id)
    if cluster is None:
        return {"cluster_id": cluster_id, "ok": False, "message": "the cluster no longer exists"}
    try:
        with cluster_client(cluster) as client:
            brokers = client.ping()
    except ClusterUnreachable as error:
        # The cluster's secrets are redacted from the client's words (cluster_client).
        ok, message = False, f"cannot reach {cluster.bootstrap_servers}: {error}"
    else:
        ok, message = True, f"connected: {brokers} broker(s) answered"
    cluster_record_test(cluster_id=cluster_id, ok=ok, message=message)
    return {"cluster_id": cluster_id, "ok": ok, "message": message}
