"""Spark's Kafka source and sink as every backfill read and write uses them:
the client options (SASL included) and the fetch settings. The Spark job
reads the ranges through it, and the Kafka sink writes the replay topic and
reads it back through it. No Django.
"""

from __future__ import annotations

import json

from tasks.spark.spec import JobSpec, KafkaSettings, min_partitions

# Bigger fetches than the consumer defaults (1 MiB per partition): a backfill
# reads long contiguous ranges, and fetch round trips dominate otherwise.
FETCH_OPTIONS = {
    "kafka.max.partition.fetch.bytes": str(8 * 1024 * 1024),
    "kafka.fetch.max.bytes": str(64 * 1024 * 1024),
    "kafka.receive.buffer.bytes": str(2 * 1024 * 1024),
    # Spark asks the consumer for the next records one poll at a time; 500 per
    # poll (the default) costs a poll per 100 KiB here.
    "kafka.max.poll.records": "10000",
    # A range ending near the log end otherwise waits for the broker to park
    # an empty fetch (500 ms by default) once per task: 0.4-0.5 s of a warm
    # 1M-record read here. A backfill never waits for new records.
    "kafka.fetch.max.wait.ms": "10",
}


def kafka_options(settings: KafkaSettings, password: str) -> dict[str, str]:
    """Options of Spark's Kafka source and sink (``kafka.``-prefixed client settings)."""
    options = {
        "kafka.bootstrap.servers": settings.bootstrap_servers,
        "kafka.security.protocol": settings.security_protocol,
    }
    if settings.sasl_mechanism:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if settings.sasl_mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )

        def quoted(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        options["kafka.sasl.mechanism"] = settings.sasl_mechanism
        options["kafka.sasl.jaas.config"] = (
            f"{module} required username={quoted(settings.sasl_username)} password={quoted(password)};"
        )
    return options


def kafka_reader(spark, options: dict[str, str]):
    """Spark's Kafka batch source as every read of a backfill uses it (the
    ranges, and the replay topic's read-back): the client options, the
    fetch settings, headers, and offsets removed by retention skipped rather
    than failing the read."""
    return (
        spark.read.format("kafka").options(**options).options(**FETCH_OPTIONS)
        .option("includeHeaders", "true").option("failOnDataLoss", "false")
    )


def read_ranges(spark, spec: JobSpec, options: dict[str, str], *, parallelism: int):
    """The records of every range: ``assign`` the partitions, exact
    ``startingOffsets``/``endingOffsets`` (end exclusive), headers included,
    committed records only (aborted transactions are not data).

    ``failOnDataLoss=false``: offsets that retention removes while the job
    runs are skipped instead of failing the read; the summary shows them
    missing and the executor explains them. ``parallelism``: the session's
    task slots (``backfill_job.session_parallelism``)."""
    by_topic: dict[str, dict[str, dict[str, int]]] = {}
    for r in spec.ranges:
        entry = by_topic.setdefault(r.topic, {"start": {}, "end": {}})
        entry["start"][str(r.partition)] = r.start
        entry["end"][str(r.partition)] = r.end
    reader = (
        kafka_reader(spark, options)
        .option("assign", json.dumps({t: sorted(int(p) for p in e["start"]) for t, e in by_topic.items()}))
        .option("startingOffsets", json.dumps({t: e["start"] for t, e in by_topic.items()}))
        .option("endingOffsets", json.dumps({t: e["end"] for t, e in by_topic.items()}))
        .option("kafka.isolation.level", "read_committed")
    )
    split = min_partitions(spec, parallelism)
    if split:
        reader = reader.option("minPartitions", str(split))
    return reader.load()
