"""Fault tests: real processes of the test's own, killed and restarted."""

from __future__ import annotations

import pytest

from tests.faults.procs import KafkaCluster, SparkStandalone


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


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A standalone Spark master and two workers on loopback (1 core, 1 GiB
    each), shared by the session's cluster tests; killed at the end."""
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster.start()
    finally:
        cluster.close()
