"""PostgreSQL restarted under a running Celery worker and beat: the poll that
meets the restart fails and is reported, the next ones succeed, and nothing
is half-written. The app runs on a PostgreSQL cluster of this test's own."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from tests.harness.processes import Postgres, RedisServer, end_processes
from tests.harness.kafka_clients import wait_until

pytestmark = pytest.mark.timeout(600)


def _env(database_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(DATABASE_URL=database_url, REDIS_URL=redis_url, DEBUG="1", DB_CONN_MAX_AGE="0",
               POLL_INTERVAL_SECONDS="1", KAFKA_TIMEOUT_SECONDS="5")
    return env


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url.replace("postgresql://", "postgresql://", 1), connect_timeout=5) as conn:
        return conn.execute(sql).fetchone()[0]


def test_a_postgres_restart_fails_one_poll_and_the_next_ones_succeed(tmp_path, kafka_bootstrap):
    postgres = Postgres().start()
    redis_server = RedisServer().start()
    env = _env(postgres.url, redis_server.url)
    processes: list[subprocess.Popen] = []
    worker_log = tmp_path / "worker.log"
    try:
        for command in (["migrate", "--noinput", "-v0"],
                        ["register_cluster", "--name", "local", "--bootstrap-servers", kafka_bootstrap]):
            subprocess.run([sys.executable, "manage.py", *command], env=env, check=True, timeout=300,
                           capture_output=True)
        with open(worker_log, "wb") as log:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool", "threads",
                 "--concurrency", "2", "--loglevel", "INFO", "-n", "faults@%h"],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "controlplane", "beat", "--pidfile=",
             "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        polls = lambda: _count(postgres.url, "select coalesce(sum(polls_total), 0) from groups_cluster")  # noqa: E731
        wait_until(lambda: polls() >= 2, timeout=120, what="beat-driven polls to succeed", retry_on=(Exception,))

        postgres.stop()
        wait_until(lambda: "OperationalError" in worker_log.read_text(errors="replace"), timeout=60,
                   what="a poll to meet the database away")
        postgres.start()
        before = polls()
        wait_until(lambda: polls() >= before + 3, timeout=120,
                   what="polls to succeed after the restart", retry_on=(Exception,))

        text = worker_log.read_text(errors="replace")
        assert "OperationalError" in text, "the failing poll must be reported in the worker's log"
        status = _count(postgres.url, "select count(*) from groups_cluster where status = 'ok' and last_error = ''")
        assert status == 1
        # Nothing half-written: a topic is stored with its generation in one transaction.
        orphans = _count(postgres.url, "select count(*) from groups_topic t where not exists "
                                       "(select 1 from groups_partitiongeneration g where g.topic_id = t.id)")
        assert orphans == 0
        assert _count(postgres.url, "select count(*) from groups_topic") > 0
    finally:
        end_processes(processes)
        redis_server.stop()
        postgres.close()
