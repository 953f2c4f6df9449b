"""The kafka sink: replays the records to replay topics, then proves from
where each replay partition ends that it holds each offset once
(``offset_check.proven_replay``), or else reads back and counts this
attempt's own."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from groups.domain.planning import BackfillRange
from adapters.spark.offset_check import ReplayTail, proven_replay, replay_ends
from adapters.spark.reader import kafka_reader
from adapters.spark.session import V1_SOURCES, sql_api
from adapters.spark.sinks.columns import (
    ATTEMPT_HEADER,
    HEADER_TYPE,
    JOB_HEADER,
    ORIGIN_OFFSET,
    ORIGIN_PARTITION,
    ORIGIN_TOPIC,
)
from adapters.spark.sinks.summary import END_OFFSETS, READ_BACK, summarize_offsets


# The replay's producer (Kafka's Java client in Spark's writer): idempotent
# (no duplicates from its retries, order kept per partition), in large
# batches, compressed (lz4: the cheapest codec per byte on the CPU here).
REPLAY_PRODUCER = {
    "enable.idempotence": "true",
    "acks": "all",
    "linger.ms": "20",
    "batch.size": str(512 * 1024),
    "compression.type": "lz4",
}


class KafkaSink:
    """Replay topics: key and value as read, the original headers, plus
    gapwatch-origin-topic/-partition/-offset (UTF-8 text) so consumers can
    drop duplicates, and gapwatch-job/-attempt so the job can count its own
    records. At least once: a re-run after a kill may repeat records; the
    origin headers identify them."""

    needs_publish = False

    def __init__(self, spark: SparkSession, *, kafka_options: dict[str, str], topics: dict[str, str],
                 start_offsets: dict[str, dict[str, int]], job_id: str, attempt: str) -> None:
        self.spark = spark
        self.kafka_options = kafka_options
        self.topics = topics  # source topic -> replay topic
        self.start_offsets = start_offsets  # replay topic -> {partition: high watermark before writing}
        self.job_id = job_id
        self.attempt = attempt
        self.verified_by = ""

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
                .options(**{f"kafka.{key}": value for key, value in REPLAY_PRODUCER.items()})
                .save()
            )

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        """Proven from where each replay partition ends
        (``offset_check.proven_replay``: one record read per partition) when
        the replay holds every offset once and the source still holds each
        range's first offset; otherwise counted by reading back this
        attempt's records, which also locates each hole and duplicate. (No
        checksum of the write here, unlike Parquet: Spark's V1 Kafka writer,
        kept for its redacted plan, runs the write as a query of its own,
        whose observed metrics never reach the caller.)"""
        by_replay = {replay: {int(p): int(o) for p, o in offsets.items()}
                     for replay, offsets in self.start_offsets.items()}
        starts = {(replay, p): o for replay, offsets in by_replay.items() for p, o in offsets.items()}
        ends = replay_ends(ranges, self.topics, starts)
        tails, heads = self._ends_read(ranges, starts, ends)
        proven = proven_replay(ranges, starts=starts, ends=ends, tails=tails, heads=heads)
        if proven is not None:
            self.verified_by = END_OFFSETS
            return proven
        self.verified_by = READ_BACK
        own = self._replayed(by_replay).where(self._own()).select(
            self._header(ORIGIN_TOPIC).alias("topic"),
            self._header(ORIGIN_PARTITION).try_cast("int").alias("partition"),
            self._header(ORIGIN_OFFSET).try_cast("long").alias("offset"),
        )
        return summarize_offsets(self.spark, own, ranges)

    def _ends_read(self, ranges: Sequence[BackfillRange], starts: dict[tuple[str, int], int],
                   ends: dict[tuple[str, int], int]) -> tuple[dict, dict]:
        """One Spark read of both ends of the proof: each replay partition
        from the offset of the job's last record there (its start if the job
        wrote nothing to it) to its end (``offset_check.ReplayTail``: rows,
        first offset, rows of this attempt); and each source range's first
        offset, if the source still holds it (by (topic, partition): True or
        False). Both empty if Spark cannot read them (a replay partition that
        ends before the job's last record: the write was partial)."""
        F, _ = sql_api(self.spark)  # noqa: N806
        froms: dict[str, dict[int, int]] = {}
        for (replay, partition), end in ends.items():
            froms.setdefault(replay, {})[partition] = end - 1 if end > starts[(replay, partition)] else end
        firsts: dict[str, dict[int, int]] = {}
        for r in ranges:
            firsts.setdefault(r.topic, {})[r.partition] = r.start
        tail = self._replayed(froms).select("topic", "partition", "offset", self._own().alias("own"),
                                            F.lit("tail").alias("end"))
        head = self._sources_at(firsts).select("topic", "partition", "offset", F.lit(False).alias("own"),
                                               F.lit("head").alias("end"))
        try:
            rows = tail.unionByName(head).groupBy("end", "topic", "partition").agg(
                F.count(F.lit(1)).alias("rows"), F.min("offset").alias("first"),
                F.count_if("own").alias("own")).collect()
        except Exception:  # noqa: BLE001 - not proven: the read-back says what is there
            return {}, {}
        found = {(row.topic, row.partition): ReplayTail(rows=int(row.rows), first=row.first, own=int(row.own))
                 for row in rows if row.end == "tail"}
        held = {(row.topic, row.partition): row.first == firsts[row.topic][row.partition]
                for row in rows if row.end == "head"}
        return ({key: found.get(key, ReplayTail(rows=0, first=None, own=0)) for key in ends},
                {(r.topic, r.partition): held.get((r.topic, r.partition), False) for r in ranges})

    def _sources_at(self, firsts: dict[str, dict[int, int]]) -> DataFrame:
        """The one record at the given offset of each source partition, where the source still holds it."""
        frames = []
        for topic, offsets in firsts.items():
            frames.append(
                kafka_reader(self.spark, self.kafka_options)
                .option("assign", json.dumps({topic: sorted(offsets)}))
                .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in offsets.items()}}))
                .option("endingOffsets", json.dumps({topic: {str(p): o + 1 for p, o in offsets.items()}})).load()
            )
        return _union(frames)

    def _replayed(self, froms: dict[str, dict[int, int]]) -> DataFrame:
        """The replay topics' records from the given offset of each partition to its end."""
        frames = []
        for replay, offsets in froms.items():
            frames.append(
                kafka_reader(self.spark, self.kafka_options)
                .option("assign", json.dumps({replay: sorted(int(p) for p in offsets)}))
                .option("startingOffsets", json.dumps({replay: {str(p): int(o) for p, o in offsets.items()}}))
                .option("endingOffsets", "latest").load()
            )
        return _union(frames)

    def _own(self):
        """This attempt's records (its job and attempt headers)."""
        return (self._header(JOB_HEADER) == self.job_id) & (self._header(ATTEMPT_HEADER) == self.attempt)

    def _header(self, name: str):
        F, _ = sql_api(self.spark)  # noqa: N806
        # try_element_at: a record without the header gives null, not an error (ANSI mode).
        return F.try_element_at(F.filter("headers", lambda h: h["key"] == F.lit(name)), F.lit(1))["value"].cast(
            "string")

    def publish(self, manifest: dict) -> None:
        pass

    def discard(self) -> None:
        pass


def _union(frames: list[DataFrame]) -> DataFrame:
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


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
