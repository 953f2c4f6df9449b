"""The ground every feature stands on: real PostgreSQL, Redis, Celery, Kafka."""

from __future__ import annotations

import json
import socket

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from groups.models import Cluster
from tasks.celery_tasks import ping
from tasks.polling import poll_cluster
from tests.factories import user_with_role


@pytest.mark.django_db
def test_it_runs_on_postgresql_with_every_migration_applied():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("select version()")
        assert cursor.fetchone()[0].startswith("PostgreSQL")
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []


def test_it_round_trips_a_task_through_a_real_worker_and_redis(celery_worker_thread, settings):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    result = ping.delay("hello")
    assert result.get(timeout=30) == "pong:hello"


def test_it_creates_a_topic_produces_and_consumes_on_the_real_broker(kafka_bootstrap, unique):
    topic = f"foundation-{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    try:
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        producer.produce(topic, key=b"k", value=b"hello gapwatch")
        assert producer.flush(15) == 0
        consumer = Consumer(
            {"bootstrap.servers": kafka_bootstrap, "group.id": f"g-{unique}", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([topic])
        message = None
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                break
        consumer.close()
        assert message is not None and message.error() is None
        assert (message.key(), message.value(), message.offset()) == (b"k", b"hello gapwatch", 0)
    finally:
        admin.delete_topics([topic])[topic].result(timeout=30)


def _health(client) -> tuple[int, dict]:
    response = client.get("/healthz")
    return response.status_code, json.loads(response.content)


@pytest.mark.django_db
def test_healthz_is_200_from_the_last_poll_and_shows_details_only_to_people_with_a_role(client, kafka_bootstrap):
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    assert poll_cluster(cluster_id=cluster.id).ok
    status, body = _health(client)
    assert (status, body) == (200, {"status": "ok"}), "an anonymous probe learns nothing but the status"
    client.force_login(user_with_role("viewer", "viewer"))
    status, body = _health(client)
    assert status == 200, body
    assert body["checks"]["kafka"]["local"]["ok"] is True and body["checks"]["kafka"]["local"]["status"] == "ok"


@pytest.mark.django_db
def test_healthz_never_calls_a_cluster(client):
    # Never polled, at a port nobody listens on: a probe that dialled it would report it unreachable.
    Cluster.objects.create(name="elsewhere", bootstrap_servers="127.0.0.1:1")
    client.force_login(user_with_role("viewer", "viewer"))
    status, body = _health(client)
    assert status == 200
    assert body["checks"]["kafka"]["elsewhere"] == {"ok": True, "status": "new", "last_poll_at": None}


@pytest.mark.django_db
def test_healthz_is_503_naming_kafka_when_the_broker_is_not_answering(client, settings):
    # A port nobody listens on: the cluster's brokers are down (the shared broker keeps
    # running for other tests; tests/faults stops real brokers of its own).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{probe.getsockname()[1]}"
    settings.KAFKA_TIMEOUT_SECONDS = 3
    cluster = Cluster.objects.create(name="local", bootstrap_servers=nowhere)
    assert not poll_cluster(cluster_id=cluster.id).ok
    status, body = _health(client)
    assert (status, body) == (503, {"status": "unavailable"})
    client.force_login(user_with_role("viewer", "viewer"))
    status, body = _health(client)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]
    assert body["checks"]["kafka"]["local"]["ok"] is False
    assert "kafka unreachable" in body["checks"]["kafka"]["local"]["error"]


@pytest.mark.django_db
def test_healthz_is_503_naming_redis_when_redis_is_unreachable(client):
    client.force_login(user_with_role("viewer", "viewer"))
    # Port 1 on loopback refuses connections: a Redis that is down.
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        status, body = _health(client)
    assert status == 503
    assert body["checks"]["redis"]["ok"] is False
    assert body["checks"]["redis"]["error"].startswith("redis:")
