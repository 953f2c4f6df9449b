"""Spark reads an exact offset range through its Kafka source, with local jars only."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from django.conf import settings

from adapters.spark.session import build_session


@pytest.mark.spark
def test_spark_reads_exactly_the_half_open_range(kafka_bootstrap, unique):
    topic = f"spark-{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for partition in (0, 1):
        for number in range(10):
            producer.produce(topic, value=f"p{partition}-m{number}".encode(), partition=partition)
    assert producer.flush(15) == 0

    spark = build_session(master="local[2]", app_name=f"test-{unique}", jars_dir=settings.SPARK_KAFKA_JARS_DIR)
    try:
        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("assign", json.dumps({topic: [0, 1]}))
            .option("startingOffsets", json.dumps({topic: {"0": 3, "1": 0}}))
            .option("endingOffsets", json.dumps({topic: {"0": 7, "1": 2}}))
            .load()
            .select("partition", "offset", "value")
            .collect()
        )
    finally:
        spark.stop()
        admin.delete_topics([topic])[topic].result(timeout=30)

    got = sorted((row.partition, row.offset, bytes(row.value).decode()) for row in rows)
    expected = [(0, offset, f"p0-m{offset}") for offset in range(3, 7)] + [(1, 0, "p1-m0"), (1, 1, "p1-m1")]
    assert got == expected
