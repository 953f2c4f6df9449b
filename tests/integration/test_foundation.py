"""The ground every feature stands on: real PostgreSQL, Redis, Celery, Kafka."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from groups.models import Cluster
from tasks.jobs import ping


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
def test_healthz_is_200_when_database_redis_and_kafka_answer(client, kafka_bootstrap):
    Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    status, body = _health(client)
    assert status == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["kafka"]["local"] == {"ok": True, "brokers": 1}


@pytest.mark.django_db
def test_healthz_is_503_naming_kafka_when_the_broker_is_stopped(client, kafka_bootstrap, stopped_kafka):
    Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    status, body = _health(client)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]
    assert body["checks"]["kafka"]["local"]["ok"] is False
    assert "kafka unreachable" in body["checks"]["kafka"]["local"]["error"]


@pytest.mark.django_db
def test_healthz_is_503_naming_redis_when_redis_is_unreachable(client):
    # Port 1 on loopback refuses connections: a Redis that is down.
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        status, body = _health(client)
    assert status == 503
    assert body["checks"]["redis"]["ok"] is False
    assert body["checks"]["redis"]["error"].startswith("redis:")
