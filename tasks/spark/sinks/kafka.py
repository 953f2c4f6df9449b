"""The kafka sink: replays the records to replay topics, then reads back and
counts this attempt's own."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from groups.domain.planning import BackfillRange
from tasks.spark.reader import kafka_reader
from tasks.spark.session import V1_SOURCES, sql_api
from tasks.spark.sinks.columns import (
    ATTEMPT_HEADER,
    HEADER_TYPE,
    JOB_HEADER,
    ORIGIN_OFFSET,
    ORIGIN_PARTITION,
    ORIGIN_TOPIC,
)
from tasks.spark.sinks.summary import READ_BACK, summarize_offsets


class KafkaSink:
    """Replay topics: key and value as read, the original headers, plus
    gapwatch-origin-topic/-partition/-offset (UTF-8 text) so consumers can
    drop duplicates, and gapwatch-job/-attempt so the job can count its own
    records. At least once: a re-run after a kill may repeat records; the
    origin headers identify them."""

    needs_publish = False
    verified_by = READ_BACK

    def __init__(self, spark: SparkSession, *, kafka_options: dict[str, str], topics: dict[str, str],
                 start_offsets: dict[str, dict[str, int]], job_id: str, attempt: str) -> None:
        self.spark = spark
        self.kafka_options = kafka_options
        self.topics = topics  # source topic -> replay topic
        self.start_offsets = start_offsets  # replay topic -> {partition: high watermark before writing}
        self.job_id = job_id
        self.attempt = attempt

    def describe(self) -> dict:
        return {"kind": "kafka", "topics": self.topics}

    def prepare(self) -> None:
        pass

    def write(self, records: DataFrame) -> None:
        F, _ = sql_api(self.spark)  # noqa: N806
        # Never the source topic itself: a record of an unmapped topic gets no
        # topic, and the Kafka writer fails the job.
        replay_topic = F.lit(None).cast("string")
        for source, replay in self.topics.items():
            replay_topic = F.when(F.col("topic") == source, F.lit(replay)).otherwise(replay_topic)

        def header(name: str, value):
            return F.struct(F.lit(name).alias("key"), F.encode(value.cast("string"), "UTF-8").alias("value"))

        added = F.array(
            header(ORIGIN_TOPIC, F.col("topic")), header(ORIGIN_PARTITION, F.col("partition")),
            header(ORIGIN_OFFSET, F.col("offset")), header(JOB_HEADER, F.lit(self.job_id)),
            header(ATTEMPT_HEADER, F.lit(self.attempt)),
        )
        original = F.coalesce(F.col("headers"), F.array().cast(HEADER_TYPE))
        with _v1_kafka_writer(self.spark):
            (
                records.select(
                    replay_topic.alias("topic"), F.col("partition"), F.col("key"), F.col("value"),
                    F.concat(original, added).alias("headers"),
                )
                # append: the one save mode both Kafka writers share.
                .write.format("kafka").mode("append").options(**self.kafka_options)
                # Idempotent producer: no duplicates from retries, order kept per partition.
                .option("kafka.enable.idempotence", "true").option("kafka.acks", "all")
                .option("kafka.linger.ms", "20").option("kafka.batch.size", str(512 * 1024))
                .save()
            )

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        F, _ = sql_api(self.spark)  # noqa: N806

        def header_value(name: str):
            # try_element_at: a record without the header gives null, not an error (ANSI mode).
            return F.try_element_at(F.filter("headers", lambda h: h["key"] == F.lit(name)), F.lit(1))["value"].cast(
                "string")

        frames = []
        for replay, offsets in self.start_offsets.items():
            frames.append(
                kafka_reader(self.spark, self.kafka_options)
                .option("assign", json.dumps({replay: sorted(int(p) for p in offsets)}))
                .option("startingOffsets", json.dumps({replay: {str(p): int(o) for p, o in offsets.items()}}))
                .option("endingOffsets", "latest").load()
            )
        read_back = frames[0]
        for frame in frames[1:]:
            read_back = read_back.unionByName(frame)
        own = read_back.where(
            (header_value(JOB_HEADER) == self.job_id) & (header_value(ATTEMPT_HEADER) == self.attempt)
        ).select(
            header_value(ORIGIN_TOPIC).alias("topic"),
            header_value(ORIGIN_PARTITION).try_cast("int").alias("partition"),
            header_value(ORIGIN_OFFSET).try_cast("long").alias("offset"),
        )
        return summarize_offsets(self.spark, own, ranges)

    def publish(self, manifest: dict) -> None:
        pass

    def discard(self) -> None:
        pass


USE_V1_SOURCES = "spark.sql.sources.useV1SourceList"


@contextmanager
def _v1_kafka_writer(spark) -> Iterator[None]:
    """The write through Spark's DataSource V1 Kafka writer: its plan node
    prints the options redacted (``spark.redaction.regex``), where the V2
    writer's (``KafkaWrite``) prints the producer's settings, JAAS config and
    client key included, in clear in the SQL tab and the event log
    (``sparkPlanInfo``, which nothing redacts). A local session resolved the
    read already (it stays V2); a Spark Connect server resolves the whole
    plan at the write, so there the read goes through V1 as well (slower
    per record, the same records)."""
    before = spark.conf.get(USE_V1_SOURCES, V1_SOURCES)
    spark.conf.set(USE_V1_SOURCES, f"{before},kafka")
    try:
        yield
    finally:
        spark.conf.set(USE_V1_SOURCES, before)
