"""Fixtures shared by the scenario tests on the real broker."""

from __future__ import annotations

import pytest

from tests.integration.kafka_harness import Broker


@pytest.fixture
def broker(kafka_bootstrap):
    """Topics a test creates through it are deleted after the test."""
    broker = Broker(kafka_bootstrap)
    yield broker
    broker.close()


@pytest.fixture
def cluster(kafka_bootstrap):
    """The local broker registered as cluster `local` (needs the database)."""
    from groups.models import Cluster

    return Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
