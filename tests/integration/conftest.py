"""Fixtures shared by the integration tests: the real broker, the local
cluster, and users in the two roles."""

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


@pytest.fixture
def approver(db):
    """A user in the approver role (may approve remediations)."""
    from tests.factories import user_with_role

    return user_with_role("approver", "approver")


@pytest.fixture
def viewer(db):
    """A user in the viewer role (reads only)."""
    from tests.factories import user_with_role

    return user_with_role("viewer", "viewer")
