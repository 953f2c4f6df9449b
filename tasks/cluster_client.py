"""The one way a task reaches a stored cluster for a short question (the
record viewer, the topic page's broker state, an expansion's verdict): the
cluster's adapter, and every reason it could not be asked in words with the
cluster's secrets redacted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from groups.crypto import SecretUnreadable
from groups.domain.secrets import secret_redact
from groups.models import Cluster
from adapters.kafka import KafkaAdapter, KafkaUnavailable


class ClusterUnreachable(Exception):
    """The cluster is gone, its secrets cannot be read, or it did not answer:
    the message says which, with no secret in it."""


@contextmanager
def cluster_client(cluster: Cluster | None) -> Iterator[KafkaAdapter]:
    """The cluster's adapter (KAFKA_TIMEOUT_SECONDS a request); what fails
    inside is raised as ClusterUnreachable, secrets redacted."""
    secrets: tuple[str, ...] = ()
    try:
        if cluster is None:
            raise LookupError("the cluster no longer exists")
        config = cluster.client_config()
        secrets = config.secrets
        yield KafkaAdapter(config, timeout=settings.KAFKA_TIMEOUT_SECONDS)
    except (LookupError, SecretUnreadable, KafkaUnavailable) as error:
        raise ClusterUnreachable(secret_redact(str(error), *secrets)) from None
