"""Fault tests: real processes of the test's own, killed and restarted."""

from __future__ import annotations

import pytest

from tests.faults.procs import KafkaCluster
from tests.integration.conftest import approver, broker  # noqa: F401 - shared fixtures of the integration tests


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/faults/" in str(item.fspath):
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def kafka1(tmp_path):
    """A single-node KRaft broker of this test's own."""
    cluster = KafkaCluster(tmp_path / "kafka", nodes=1).start()
    yield cluster
    cluster.close()


@pytest.fixture
def kafka3(tmp_path):
    """Three KRaft nodes (broker and controller each), replication factor 3."""
    cluster = KafkaCluster(tmp_path / "kafka", nodes=3).start()
    yield cluster
    cluster.close()
