"""50 concurrent users for 15 s (``GAPWATCH_LOAD_SECONDS``; 60 for the
numbers in bench/RESULTS.md) on the pages and the API (locust) while a
real worker and beat poll the local broker and the same worker runs a Spark
backfill (approved through the API as the load starts): no error answer,
polls keep their interval (polls complete during the load, none fails,
none due is skipped unless a poll ran longer than the interval: the
cluster's own counters), and the backfill delivers
exactly its range. How many requests fit and their p95 are speeds: printed
here; with GAPWATCH_LOAD_SECONDS=60 and ``-s`` this module is the load bench
of bench/RESULTS.md ("Pages and API under load"; targets live there)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from django.db import connection

from django.utils import timezone

from groups.models import Cluster, RemediationJob
from groups.services.tokens import api_token_create
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role
from tests.harness.processes import RedisServer, end_processes, free_ports
from tests.harness.kafka_clients import Broker, wait_until
from tests.harness.backfills import Scenario, parquet_rows

ROOT = Path(__file__).resolve().parents[2]
USERS, POLL_INTERVAL = 50, 5
SECONDS = int(os.environ.get("GAPWATCH_LOAD_SECONDS", "15"))
BACKFILL_RECORDS = 20_000
POLL_COUNTERS = ("polls_total", "slow_polls_total", "skipped_polls_total", "poll_failures_total")
pytestmark = pytest.mark.timeout(600)


def _env(redis_url: str, backfills: Path) -> dict[str, str]:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(DATABASE_URL=f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
               REDIS_URL=redis_url, DEBUG="1", DB_CONN_MAX_AGE="0", POLL_INTERVAL_SECONDS=str(POLL_INTERVAL),
               BACKFILL_OUTPUT=str(backfills), SPARK_MASTER="local[2]", SPARK_CONNECT_URL="")
    return env


def _backfill_gap(kafka_bootstrap: str, unique: str) -> tuple[Scenario, str]:
    """Gap findings (BACKFILL_RECORDS on each of two partitions) on a cluster
    of their own, not polled (its groups are stored, not real), and an
    approver's API key."""
    scenario = Scenario(Broker(kafka_bootstrap), f"backfill-{unique}", f"load-{unique}", BACKFILL_RECORDS)
    Cluster.objects.filter(id=scenario.cluster.id).update(enabled=False)
    _, key = api_token_create(user=user_with_role("approver", "approver"), name="load-backfill")
    return scenario, key


def poll_counters(cluster_id: int) -> dict[str, int]:
    return Cluster.objects.values(*POLL_COUNTERS).get(id=cluster_id)


def _stored_state() -> dict[str, str]:
    """A busy dashboard: 300 findings on a second (not polled) cluster."""
    prod = make_cluster("prod", enabled=False)
    topic = make_topic(prod, "orders", partition_count=40)
    generation = make_generation(topic, 2, tuple(range(40)))
    group = make_group(prod, "billing")
    for number in range(10):
        other = make_group(prod, f"group-{number}")
        for partition in range(30):
            make_finding(other, generation, partition, minutes_ago=partition)
    user_with_role("viewer", "viewer")
    _, key = api_token_create(user=user_with_role("robot", "viewer"), name="load")
    return {"GAPWATCH_LOAD_USERNAME": "viewer", "GAPWATCH_LOAD_PASSWORD": "pw-viewer", "GAPWATCH_LOAD_TOKEN": key,
            "GAPWATCH_LOAD_GROUP": str(group.id), "GAPWATCH_LOAD_TOPIC": str(topic.id)}


@pytest.mark.spark
def test_fifty_users_during_a_backfill_get_no_error_and_polls_keep_their_interval(
    transactional_db, kafka_bootstrap, tmp_path, unique
):
    local = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    load_env = _stored_state()
    scenario, approver_key = _backfill_gap(kafka_bootstrap, unique)
    redis_server = RedisServer().start()
    env = _env(redis_server.url, tmp_path / "backfills")
    port = free_ports(1)[0]
    web_log = open(tmp_path / "gunicorn.log", "w")  # said below when a request failed
    processes = [
        subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:controlplane.gunicorn_conf",
                          "controlplane.wsgi", "--bind", f"127.0.0.1:{port}"],
                         env=env, stdout=subprocess.DEVNULL, stderr=web_log),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool", "threads",
                          "--concurrency", "2", "-n", "load@%h"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "controlplane", "beat", "--pidfile=",
                          "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    host = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{host}/accounts/login/", timeout=2).ok, timeout=60,
                   what="gunicorn", retry_on=(Exception,))
        wait_until(lambda: Cluster.objects.get(id=local.id).polls_total > 0, timeout=60,
                   what="a first poll", retry_on=(Exception,))

        locust = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "load" / "locustfile.py"), "--headless",
             "-u", str(USERS), "-r", "10", "-t", f"{SECONDS}s", "--host", host, "--csv", str(tmp_path / "load"),
             "--only-summary", "--exit-code-on-error", "0",
             # A user still waiting for an answer when the time is up gets it (and it is counted):
             # on a busy machine 49 of 50 users' first requests were still on the wire.
             "--stop-timeout", "60"],
            env={**env, **load_env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        approval = requests.post(f"{host}/api/v1/findings/{scenario.findings[0].id}/approve", timeout=60,
                                 json={"kind": "backfill", "sink": "parquet", "also": [scenario.findings[1].id]},
                                 headers={"Authorization": f"Token {approver_key}"})
        assert approval.status_code in (200, 201), approval.text[:500]
        job_id = approval.json()["id"]
        before = poll_counters(local.id)
        _, errors = locust.communicate(timeout=SECONDS + 180)
        assert locust.returncode == 0, errors[-2000:]
        during = {name: count - before[name] for name, count in poll_counters(local.id).items()}
        load_ended = timezone.now()
        wait_until(lambda: RemediationJob.objects.get(id=job_id).status in RemediationJob.FINISHED, timeout=600,
                   interval=1, what="the backfill to finish", retry_on=(Exception,))
        # A poll still running when the load ended has ended by now: counted slow if it was.
        slow_by_now = poll_counters(local.id)["slow_polls_total"] - before["slow_polls_total"]
    finally:
        end_processes(processes)
        redis_server.stop()
        web_log.close()

    with open(tmp_path / "load_stats.csv") as stats_file:
        rows = list(csv.DictReader(stats_file))
    print(f"\nload: {USERS} users for {SECONDS}s against {host}")
    print("| request | count | failures | median ms | p95 ms | p99 ms |")
    for row in rows:
        print(f"| {row['Name']} | {row['Request Count']} | {row['Failure Count']} | {row['50%']} | "
              f"{row['95%']} | {row['99%']} |")
    total = next(row for row in rows if row["Name"] == "Aggregated")
    failures = (tmp_path / "load_failures.csv").read_text()
    # The load ran: every user was answered at least once. How many requests fit in the window is a
    # speed (92 and 99 on a busy 2-core machine, more when quiet): bench/RESULTS.md, not a test's bound.
    assert int(total["Request Count"]) >= USERS
    assert int(total["Failure Count"]) == 0, failures + "\ngunicorn:\n" + (tmp_path / "gunicorn.log").read_text()[-3000:]

    job = RemediationJob.objects.get(id=job_id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["delivered"] == job.result["expected"] == 2 * BACKFILL_RECORDS
    assert parquet_rows(str(tmp_path / "backfills" / str(job.id))) == scenario.expected_rows()
    assert job.started_at < load_ended, "the backfill ran during the load"
    print(f"backfill during the load: {job.status_reason}, {job.started_at:%H:%M:%S}-{job.finished_at:%H:%M:%S}, "
          f"load ended {load_ended:%H:%M:%S}")

    # Polls kept their interval, as the cluster counts them: they went on completing and none failed; a
    # poll due was skipped only behind a poll that ran longer than the interval (slow), never behind a
    # backfill or a request holding the worker. How many were slow, and so skipped, is a speed (on a host
    # at half its usual speed, 2 of 7 polls were slow and 1 skipped): printed here, measured in the bench.
    print(f"polls during the load: {during}, slow ones counted by the backfill's end: {slow_by_now}")
    assert during["polls_total"] >= SECONDS // (2 * POLL_INTERVAL), during
    assert during["poll_failures_total"] == 0, during
    assert during["skipped_polls_total"] == 0 or slow_by_now > 0, (during, slow_by_now)
