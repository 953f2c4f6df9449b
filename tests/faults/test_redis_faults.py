"""Redis (the Celery broker) stopped under a running web server and beat:
pages still render from PostgreSQL, an approval fails with a clear message
and writes nothing, and beat publishes again once Redis is back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis
import requests
from django.db import connection

from groups.models import AuditEvent, RemediationJob
from groups.services.tokens import api_token_create
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role
from tests.harness.processes import RedisServer, end_processes, free_ports
from tests.harness.kafka_clients import wait_until


def _app_env(redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of an app process that shares this test's database."""
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        REDIS_URL=redis_url, DEBUG="1", DB_CONN_MAX_AGE="0", **extra,
    )
    return env


@pytest.fixture
def redis_server():
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def web(redis_server, transactional_db):
    """gunicorn serving this test's database, with Celery on ``redis_server``."""
    port = free_ports(1)[0]
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "controlplane.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--threads", "4", "--timeout", "60"],
        env=_app_env(redis_server.url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{url}/accounts/login/", timeout=2).status_code == 200,
                   timeout=60, what="gunicorn", retry_on=(Exception,))
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def logged_in(url: str, username: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{url}/accounts/login/", timeout=10)
    answer = session.post(f"{url}/accounts/login/", timeout=10, data={
        "username": username, "password": f"pw-{username}", "csrfmiddlewaretoken": session.cookies["csrftoken"],
    }, headers={"Referer": f"{url}/accounts/login/"}, allow_redirects=False)
    assert answer.status_code == 302, answer.status_code
    return session


def test_with_redis_stopped_pages_render_and_an_approval_writes_nothing(web, redis_server):
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "orders")
    finding = make_finding(make_group(cluster, "billing", state="Empty", member_count=0),
                           make_generation(topic, 2, (0, 1, 2)), 2)
    approver = user_with_role("approver", "approver")
    _, key = api_token_create(user=approver, name="faults")
    browser = logged_in(web, "approver")
    redis_server.stop()

    for page in ("/", "/jobs/", f"/groups/{finding.group_id}/", f"/topics/{topic.id}/", "/api/v1/findings"):
        answer = browser.get(f"{web}{page}", timeout=30)
        assert answer.status_code == 200, (page, answer.status_code)

    jobs_before, audit_before = RemediationJob.objects.count(), AuditEvent.objects.count()
    answer = requests.post(f"{web}/api/v1/findings/{finding.id}/approve", timeout=60,
                           json={"kind": "backfill", "sink": "parquet"},
                           headers={"Authorization": f"Token {key}"})
    assert answer.status_code == 503, (answer.status_code, answer.text[:300])
    assert "queue" in answer.json()["error"].lower()
    assert RemediationJob.objects.count() == jobs_before
    assert AuditEvent.objects.count() == audit_before

    redis_server.start_again()
    answer = requests.post(f"{web}/api/v1/findings/{finding.id}/approve", timeout=60,
                           json={"kind": "backfill", "sink": "parquet"},
                           headers={"Authorization": f"Token {key}"})
    assert answer.status_code in (200, 201), (answer.status_code, answer.text[:300])
    assert RemediationJob.objects.count() == jobs_before + 1
    queued = redis.Redis.from_url(redis_server.url).llen("celery")
    assert queued == 1, "the job's task must be on the queue once Redis is back"


def beat_failed_to_publish(log: str) -> bool:
    """What celery beat logs when a tick's publish fails, or its connection does."""
    return "Message Error" in log or "beat: Connection error" in log


@pytest.mark.django_db(transaction=True)
def test_beat_publishes_again_when_redis_returns(redis_server, tmp_path):
    beat_log = tmp_path / "beat.log"
    with open(beat_log, "wb") as log:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "controlplane", "beat", "--loglevel", "INFO", "--pidfile=",
             "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
            env=_app_env(redis_server.url, POLL_INTERVAL_SECONDS="1"),
            stdout=log, stderr=subprocess.STDOUT,
        )
    client = redis.Redis.from_url(redis_server.url, socket_connect_timeout=1)
    try:
        wait_until(lambda: client.llen("celery") > 0, timeout=60, what="beat to publish a poll", retry_on=(Exception,))
        redis_server.stop()
        # Redis was there until now: a publish that failed was one of a tick while it is away.
        wait_until(lambda: beat_failed_to_publish(beat_log.read_text(errors="replace")), timeout=60,
                   what="a tick of beat to fail while Redis is away")
        assert beat.poll() is None, "beat exited while Redis was away"
        redis_server.start_again()
        client = redis.Redis.from_url(redis_server.url, socket_connect_timeout=1)
        wait_until(lambda: client.llen("celery") > 0, timeout=60, what="beat to publish again", retry_on=(Exception,))
    finally:
        end_processes([beat])
