"""Shared fixtures: the real services started by `make test` (scripts/services.sh)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

import tests.harness  # noqa: F401 - first: it sets up the environment of the processes the tests start

ROOT = Path(__file__).resolve().parent.parent
# Playwright's sync API runs an event loop in the test thread.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# WhiteNoise warns on every request when STATIC_ROOT does not exist (no collectstatic in tests).
(ROOT / ".gapwatch" / "static").mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="session", autouse=True)
def _quick_password_hashes():
    """Every password a test sets or checks in this process is hashed with
    tests.factories.QuickPBKDF2PasswordHasher (what a login costs is
    bench/RESULTS.md's business, not the suite's)."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.factories.QuickPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _cached_kafka_clients_dropped():
    """After each test, the Kafka clients the poll keeps in this process (one
    per cluster, ``tasks.polling.cluster_adapter``) are dropped, and closed
    once nobody holds them: the test's clusters went with its rows, and a kept
    client of a deleted cluster kept its Java Admin's thread, and librdkafka's,
    reconnecting to brokers the test had stopped, for the rest of the run."""
    yield
    polling = sys.modules.get("tasks.polling")
    if polling is not None:
        polling.forget_adapter()


@pytest.fixture
def unique():
    """A short unique suffix, so tests sharing one broker never collide."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")


@pytest.fixture
def celery_worker_thread(transactional_db):
    """A real Celery worker (threads) consuming from the real Redis broker.

    Its tasks have ended before the test's database is flushed: Celery's
    test worker stops with a cold shutdown, which leaves the thread pool's
    running tasks running, and one still writing (a job's check after the
    test's last poll) once deadlocked with the flush's TRUNCATE."""
    from celery.contrib.testing.worker import start_worker

    from controlplane.celery import app
    from tests.harness.workers import empty_queues

    empty_queues()  # the tests before this one left messages for no worker
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=30) as worker:
        yield worker
    worker.pool.executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Before the test database is dropped, end sessions that threads of the
    live server (a browser's keep-alive socket) or a Celery worker still hold:
    client sessions of the tests' own user only (an autovacuum worker busy on
    the database at that moment is the server's, and may not be ended by it)."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where datname = current_database() and pid <> pg_backend_pid()"
            " and backend_type = 'client backend' and usename = current_user"
        )



@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """One Spark Connect server (local[2]) for the session's tests that run
    jobs on a server they do not kill (a test that kills one starts its own)."""
    from tests.harness.connect import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("spark-connect") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def backfill_settings(settings, tmp_path):
    """Backfills to a folder of the test's own, on ``local[2]``, in a Spark
    process of their own (no Connect server unless the test names one)."""
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.SPARK_MASTER = "local[2]"
    settings.SPARK_CONNECT_URL = ""
    settings.BACKFILL_TIMEOUT_SECONDS = 300
    return settings


@pytest.fixture
def backfill_on_server(backfill_settings, connect_server):
    """``backfill_settings`` with the backfills on the session's Spark Connect
    server: for tests about what a backfill delivers (a release's broker,
    transactions, a share group's range), not about the Spark process it runs
    in (tests/integration/test_backfill.py), which costs a JVM start per job."""
    backfill_settings.SPARK_CONNECT_URL = connect_server.url
    backfill_settings.SPARK_CONNECT_TOKEN = connect_server.token
    return backfill_settings


@pytest.fixture
def enqueued(monkeypatch):
    """Jobs job_request would hand to Celery after commit; the tests run them
    with the real task function instead of a shared broker queue."""
    job_ids: list[int] = []
    monkeypatch.setattr("groups.services.remediation._enqueue_on_commit", job_ids.append)
    return job_ids


@pytest.fixture
def broker(kafka_bootstrap):
    """Topics a test creates through it are deleted after the test."""
    from tests.harness.kafka_clients import Broker

    broker = Broker(kafka_bootstrap)
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def kafka_4_3(tmp_path_factory):
    """A single-node Kafka 4.3.1 broker of the session's own (the release
    matrix's jars), started on first use: the last release whose share groups
    start a partition added to a topic they read at its end, and so lose what
    was written before (4.4.0 starts it at offset 0, KAFKA-20742)."""
    from tests.harness.processes import KafkaCluster

    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-4.3.1"), release="4.3.1", heap="384m").start()
    yield cluster
    cluster.close()


@pytest.fixture
def approver(db):
    """A user in the approver role (may approve remediations)."""
    from tests.factories import user_with_role

    return user_with_role("approver", "approver")


@pytest.fixture
def job_files(monkeypatch):
    """The spec file and the whole log of every backfill attempt, as written
    (what the tests of secrets grep)."""
    from tasks.backfill import runner

    seen = {"specs": [], "logs": []}
    real_launch, real_tail = runner.launch, runner._tail

    def launch(spec, *, spec_path, **kwargs):
        seen["specs"].append(Path(spec_path).read_text())
        return real_launch(spec, spec_path=spec_path, **kwargs)

    def tail(path, *args, **kwargs):
        seen["logs"].append(Path(path).read_text(errors="replace") if Path(path).exists() else "")
        return real_tail(path, *args, **kwargs)

    monkeypatch.setattr(runner, "launch", launch)
    monkeypatch.setattr(runner, "_tail", tail)
    return seen
