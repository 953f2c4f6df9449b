""""Test connection" of a cluster: ask it for its metadata, record the answer
on the cluster (and in the audit trail), never the password."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from groups.crypto import SecretUnreadable
from groups.domain.secrets import secret_redact
from groups.selectors.clusters import cluster_find
from groups.services.clusters import cluster_record_test
from adapters.kafka import KafkaAdapter, KafkaUnavailable


@shared_task(name="gapwatch.test_connection")
def run_connection_test(cluster_id: int) -> dict:
    """Ping the cluster with the stored settings; record and return ``ok`` and ``message``."""
    cluster = cluster_find(cluster_id=cluster_id)
    if cluster is None:
        return {"cluster_id": cluster_id, "ok": False, "message": "the cluster no longer exists"}
    secrets: tuple[str, ...] = ()
    try:
        config = cluster.client_config()
        secrets = config.secrets
        brokers = KafkaAdapter(config, timeout=settings.KAFKA_TIMEOUT_SECONDS).ping()
    except SecretUnreadable as error:
        ok, message = False, str(error)
    except KafkaUnavailable as error:
        # A client error could quote its configuration; never let a secret through.
        ok, message = False, secret_redact(f"cannot reach {cluster.bootstrap_servers}: {error}", *secrets)
    else:
        ok, message = True, f"connected: {brokers} broker(s) answered"
    cluster_record_test(cluster_id=cluster_id, ok=ok, message=message)
    return {"cluster_id": cluster_id, "ok": ok, "message": message}
