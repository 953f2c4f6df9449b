"""The one way a task builds a Kafka client for a cluster.

``kafka_client`` and ``java_client`` give the adapters (librdkafka's and
Kafka's Java Admin client) with the settings every task uses
(``KAFKA_TIMEOUT_SECONDS`` a request, at most ``KAFKA_MAX_IN_FLIGHT`` admin
calls at once); ``cluster_client`` is the short question (the record viewer,
the topic page's broker state, an expansion's verdict, "test connection"):
the stored cluster's client, and every reason it could not be asked in
words with the cluster's secrets redacted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from adapters.kafka import KafkaAdapter, KafkaUnavailable
from adapters.kafka.java_admin import JavaAdmin
from groups.crypto import SecretUnreadable
from groups.domain.cluster_config import ClusterConfig
from groups.domain.secrets import secret_redact
from groups.models import Cluster


class ClusterUnreachable(Exception):
    """The cluster is gone, its secrets cannot be read, or it did not answer:
    the message says which, with no secret in it."""


def kafka_client(config: ClusterConfig) -> KafkaAdapter:
    """A Kafka client (librdkafka) for ``config``; it connects on its first request."""
    return KafkaAdapter(config, timeout=settings.KAFKA_TIMEOUT_SECONDS, max_in_flight=settings.KAFKA_MAX_IN_FLIGHT)


def java_client(config: ClusterConfig) -> JavaAdmin:
    """Kafka's Java Admin client for ``config`` (share and streams groups); close it after use."""
    return JavaAdmin(config, timeout=settings.KAFKA_TIMEOUT_SECONDS)


@contextmanager
def cluster_client(cluster: Cluster | None) -> Iterator[KafkaAdapter]:
    """The stored cluster's Kafka client; what fails inside is raised as
    ClusterUnreachable, secrets redacted."""
    secrets: tuple[str, ...] = ()
    try:
        if cluster is None:
            raise LookupError("the cluster no longer exists")
        config = cluster.cluster_config()
        secrets = config.secrets
        client = kafka_client(config)
        try:
            yield client
        finally:
            client.close()  # a Java Admin it made lives until closed
    except (LookupError, SecretUnreadable, KafkaUnavailable) as error:
        raise ClusterUnreachable(secret_redact(str(error), *secrets)) from None
