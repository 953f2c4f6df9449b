"""Spark's Kafka source and sink as every backfill read and write uses them:
the client options (TLS and SASL included) and the fetch settings. The Spark job
reads the ranges through it, and the Kafka sink writes the replay topic and
reads it back through it. No Django.
"""

from __future__ import annotations

import json

from adapters.spark.spec import JobSpec, KafkaSecrets, KafkaSettings, min_partitions

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


# The names of options that hold a secret: every option kafka_options gives a
# secret (the JAAS config: SASL password, OAuth client secret;
# ssl.key.password; the key itself, ssl.keystore.key) and the usual others.
SECRET_OPTION_NAMES = "secret|password|token|access[.]?key|jaas|keystore[.]key|private.key"
# Spark's spark.redaction.regex (set on every session and the Connect server;
# spark.sql.redaction.options.regex on a Connect session, ``SESSION_REDACTION``):
# an option is redacted in Spark's logs, UI, plans and event log when its name
# or value matches (a value holding a PEM private key matches too).
REDACTION_REGEX = f"(?i){SECRET_OPTION_NAMES}"
# Spark's spark.sql.redaction.string.regex: redacts what it matches in text
# Spark prints whole. A Spark Connect server prints each operation's plan as
# protobuf text (the Connect tab of its UI, and SparkListenerConnectOperationStarted
# in its event log), options included, where spark.redaction.regex never looks:
# without this, the JAAS config stood there in clear. Matches such an option's
# whole value (protobuf text escapes quotes and backslashes), and a PEM private
# key in any text.
STRING_REDACTION_REGEX = (
    rf'(?i)key:\s*"[^"]*(?:{SECRET_OPTION_NAMES})[^"]*"\s*value:\s*"(?:[^"\\]|\\.)*"'
    r"|-----BEGIN[A-Z ]*PRIVATE KEY-----(?:[A-Za-z0-9+/=\s]|\\n)*"
)
# What a backfill sets on its Spark Connect session before any operation, so
# that its options are redacted on any server, also one started without
# ``adapters.spark.connect.SERVER_CONF`` (runtime SQL settings of the session).
SESSION_REDACTION = {
    # Spark's default ("(?i)url") kept.
    "spark.sql.redaction.options.regex": f"(?i)url|{SECRET_OPTION_NAMES}",
    "spark.sql.redaction.string.regex": STRING_REDACTION_REGEX,
}
def kafka_options(settings: KafkaSettings, secrets: KafkaSecrets) -> dict[str, str]:
    """Options of Spark's Kafka source and sink: the cluster's Java client
    options (``ClusterConfig.java_options``, the one mapping), ``kafka.``
    prefixed. Every option holding a secret matches ``REDACTION_REGEX`` by
    its name."""
    return {f"kafka.{name}": value for name, value in settings.config(secrets).java_options().items()}


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
    with the group's isolation level (``spec.isolation``): a read_committed
    group's backfill gets no record of an aborted transaction. Spark's own
    default is read_uncommitted, so it is always set. The runner started the
    job only once the last stable offset passed every range's end: a
    read_committed read of an offset an open transaction holds would end early.

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
        .option("kafka.isolation.level", spec.isolation)
        # A broker that stops answering fails the job after about this long
        # (fetches; the offsets Spark plans with, retried fetchOffset.numRetries
        # = 3 times), not after Spark's 120 s per fetch and 60 s per offset request.
        .option("kafkaConsumer.pollTimeoutMs", str(spec.kafka_timeout_ms))
        .option("kafka.default.api.timeout.ms", str(spec.kafka_timeout_ms))
        .option("kafka.request.timeout.ms", str(min(spec.kafka_timeout_ms, 30_000)))
    )
    split = min_partitions(spec, parallelism)
    if split:
        reader = reader.option("minPartitions", str(split))
    return reader.load()
