"""Fault tests: real processes of the test's own, killed and restarted."""

from __future__ import annotations

import pytest

from tests.harness.processes import KafkaCluster, SparkStandalone
from tests.harness.connect import ConnectServer
from tests.harness.kafka_clients import wait_until
from tests.harness.workers import empty_queues
from tests.xdist_schedule import unit_of

# The fault tests' Kafka clusters running now, stopped when this worker's next test belongs to another unit
# of work (tests/xdist_schedule.py): their unit is over, and an idle KRaft node costs about 1 CPU second
# a minute (2-3 on a slow host; measured beside a 3-node cluster), for the rest of the run otherwise. Their
# data stays: a later test that asks for one starts its nodes again (``heal``), as in a one-process run,
# where the unit's modules do not follow one another.
_RESTING_AFTER_THE_UNIT: dict[int, KafkaCluster] = {}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "kills_a_spark_worker: runs after the other tests on the standalone Spark cluster (below)")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/faults/" in str(item.fspath):
            item.add_marker(pytest.mark.faults)
    # A test that kills a worker of ``spark_cluster`` runs after every test of the session's
    # Connect server on it: once the killed worker's job ends, the master gives the server's
    # lost executor to the surviving worker, and the server keeps both executors there.
    items.sort(key=lambda item: item.get_closest_marker("kills_a_spark_worker") is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if _RESTING_AFTER_THE_UNIT and (nextitem is None or unit_of(nextitem.nodeid) != unit_of(item.nodeid)):
        for cluster in _RESTING_AFTER_THE_UNIT.values():
            cluster.rest()
        _RESTING_AFTER_THE_UNIT.clear()
    return result


def _healed(cluster: KafkaCluster) -> KafkaCluster:
    _RESTING_AFTER_THE_UNIT[id(cluster)] = cluster
    return cluster.heal()


@pytest.fixture(autouse=True)
def _celery_queues_start_empty():
    """A worker a fault test starts runs that test's messages only (``empty_queues``)."""
    empty_queues()


@pytest.fixture(scope="session")
def _kafka1_cluster(tmp_path_factory):
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka1"), nodes=1).start()
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def _kafka3_cluster(tmp_path_factory):
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka3"), nodes=3).start()
    yield cluster
    cluster.close()


@pytest.fixture
def kafka1(_kafka1_cluster):
    """A single-node KRaft broker of the fault tests' own (not the shared
    broker of `make test`), whole when the test starts: the tests that stop,
    kill or freeze it share it, each on topics and groups of its own."""
    return _healed(_kafka1_cluster)


@pytest.fixture
def kafka3(_kafka3_cluster):
    """Three KRaft nodes (broker and controller each), replication factor 3,
    every node running when the test starts; shared like ``kafka1``."""
    return _healed(_kafka3_cluster)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A standalone Spark master and two workers on loopback (2 cores, 1 GiB
    each; an application gets 1 core on each worker, so the session's Connect
    server and a job process run side by side), shared by the session's
    cluster tests; killed at the end."""
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), cores=2, app_cores=2)
    try:
        yield cluster.start()
    finally:
        cluster.close()


@pytest.fixture
def on_cluster(spark_cluster, settings, monkeypatch, tmp_path):
    """Backfills of this test run in Spark processes of their own on the
    standalone cluster; those processes read the cluster's client settings
    (``SparkStandalone.client_env``)."""
    settings.SPARK_MASTER = spark_cluster.url
    settings.SPARK_CONNECT_URL = ""
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.BACKFILL_TIMEOUT_SECONDS = 300
    for name, value in spark_cluster.client_env().items():
        monkeypatch.setenv(name, value)
    spark_cluster.wait_workers(2)
    return spark_cluster


@pytest.fixture(scope="session")
def cluster_server(spark_cluster, tmp_path_factory):
    """A Spark Connect server on the standalone cluster, with the cluster's
    client settings (its event log among them), shared by the session's
    tests on the cluster: it holds one core of each worker, the other is the
    job processes' (``on_cluster``)."""
    spark_cluster.wait_workers(2)
    server = ConnectServer(tmp_path_factory.mktemp("connect-on-cluster") / "server.log", master=spark_cluster.url,
                           extra_env=spark_cluster.client_env())
    yield server
    server.stop()


@pytest.fixture
def on_server(cluster_server, spark_cluster, settings, tmp_path):
    """Backfills of this test run on ``cluster_server`` (the session's Connect
    server on the standalone cluster), never in a process of their own; the
    server has an executor on each of the two workers."""
    spark_cluster.wait_workers(2)
    (application,) = [app for app in spark_cluster.applications("gapwatch-spark-connect") if app["state"] == "RUNNING"]
    wait_until(lambda: spark_cluster.executor_workers(application["id"]) == set(spark_cluster.workers), timeout=120,
               what="an executor of the Connect server on each worker")
    settings.SPARK_CONNECT_URL = cluster_server.url
    settings.SPARK_CONNECT_TOKEN = cluster_server.token
    settings.SPARK_MASTER = "local[1]"  # never used: the job must run on the server
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.BACKFILL_TIMEOUT_SECONDS = 300
    return cluster_server
