"""Where a backfill delivers the records it read, and how it counts what it
delivered. Runs inside the Spark job process (``tasks.spark.backfill_job``):
no Django, no ORM.

Every sink ends with the same per-partition summary (``tasks.spark.counting``):
how many of the offsets ``[start, end)`` it delivered, which offsets are
missing (``holes``, half-open ranges), duplicates and records outside the
range. The runner (``tasks.backfill.runner``) explains the missing offsets.

- ``ParquetSink`` writes to a staging folder, counts what the staging folder
  holds (read back from storage, not from the writer), and only then swaps it
  in as ``<output>/<job id>/``: a re-run replaces the previous output, never
  adds to it.
- ``KafkaSink`` produces to the replay topic (partition p of the source goes
  to partition p of the replay topic, so per-partition order is kept), with
  origin headers, then reads the replay topic back from where it stood before
  the write and counts the records that carry this attempt's headers.
- ``HandlerSink`` calls a Python function once per Spark partition with an
  iterator of records, and counts the records the function pulled.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from groups.domain.planning import BackfillRange
from tasks.spark.counting import handler_summaries, partition_summary
from tasks.spark.reader import kafka_reader

HEADER_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
# The data set's columns, in order. topic and partition are also the folder
# levels (topic=<t>/partition=<p>/), so Parquet readers get them back.
RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
PARQUET_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("headers", HEADER_TYPE),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
    ]
)
ORIGIN_TOPIC = "gapwatch-origin-topic"
ORIGIN_PARTITION = "gapwatch-origin-partition"
ORIGIN_OFFSET = "gapwatch-origin-offset"
JOB_HEADER = "gapwatch-job"
ATTEMPT_HEADER = "gapwatch-attempt"
MANIFEST_NAME = "_gapwatch.json"


# -- counting what was delivered ------------------------------------------------


def summarize_offsets(spark: SparkSession, delivered: DataFrame, ranges: Sequence[BackfillRange]) -> list[dict]:
    """Per range, from a DataFrame of delivered (topic, partition, offset):

    1. one aggregation: rows and distinct offsets inside the range, min and
       max offset, rows outside it;
    2. only for partitions with missing offsets, the contiguous runs
       ("islands") of delivered offsets, with a window over the sorted
       distinct offsets (offset - row_number is constant along a run).
    Records of partitions that are not in the job count as ``outside_range``
    of a summary entry of their own (expected 0).
    """
    bounds = spark.createDataFrame(
        [(r.topic, r.partition, r.start, r.end) for r in ranges],
        "topic string, partition int, range_start long, range_end long",
    )
    tagged = delivered.join(F.broadcast(bounds), ["topic", "partition"], "left").withColumn(
        "in_range", F.coalesce((F.col("offset") >= F.col("range_start")) & (F.col("offset") < F.col("range_end")),
                               F.lit(False))
    )
    in_range_offset = F.when(F.col("in_range"), F.col("offset"))
    stats = {
        (row.topic, row.partition): row
        for row in tagged.groupBy("topic", "partition").agg(
            F.sum(F.col("in_range").cast("long")).alias("rows_in_range"),
            F.count_distinct(in_range_offset).alias("distinct_in_range"),
            F.min(in_range_offset).alias("low"),
            F.max(in_range_offset).alias("high"),
            F.sum((~F.col("in_range")).cast("long")).alias("rows_outside"),
        ).collect()
    }
    gappy = []
    islands: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in ranges:
        row = stats.get((r.topic, r.partition))
        if row is None or not row.distinct_in_range:
            islands[(r.topic, r.partition)] = []
        elif row.distinct_in_range == row.high - row.low + 1:
            islands[(r.topic, r.partition)] = [(row.low, row.high + 1)]
        else:
            gappy.append((r.topic, r.partition))
    if gappy:
        wanted = spark.createDataFrame(gappy, "topic string, partition int")
        runs = (
            tagged.where("in_range").join(F.broadcast(wanted), ["topic", "partition"])
            .select("topic", "partition", "offset").distinct()
            .withColumn("run", F.col("offset") - F.row_number().over(
                Window.partitionBy("topic", "partition").orderBy("offset")))
            .groupBy("topic", "partition", "run").agg(F.min("offset").alias("low"), F.max("offset").alias("high"))
            .orderBy("topic", "partition", "low")
        )
        for row in runs.toLocalIterator():
            islands.setdefault((row.topic, row.partition), []).append((row.low, row.high + 1))
    summaries = []
    for r in ranges:
        row = stats.get((r.topic, r.partition))
        summaries.append(partition_summary(
            topic=r.topic, partition=r.partition, start=r.start, end=r.end,
            rows_in_range=int(row.rows_in_range or 0) if row else 0,
            distinct_in_range=int(row.distinct_in_range or 0) if row else 0,
            islands=islands.get((r.topic, r.partition), []),
            rows_outside=int(row.rows_outside or 0) if row else 0,
        ))
    planned = {(r.topic, r.partition) for r in ranges}
    for (topic, partition), row in sorted(stats.items()):
        if (topic, partition) not in planned:
            summaries.append(partition_summary(topic=topic, partition=partition, start=0, end=0, rows_in_range=0,
                                               distinct_in_range=0, islands=[], rows_outside=int(row.rows_outside)))
    return summaries


# -- Hadoop file system (any Hadoop-compatible URI, local folders included) ----


class HadoopFiles:
    """The few file operations the Parquet sink needs, through Hadoop's
    FileSystem API, so ``hdfs://``, ``s3a://`` and local paths behave alike."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, uri: str):
        return self._jvm.org.apache.hadoop.fs.Path(uri)

    def _fs(self, uri: str):
        return self._path(uri).getFileSystem(self._conf)

    def exists(self, uri: str) -> bool:
        return bool(self._fs(uri).exists(self._path(uri)))

    def delete(self, uri: str) -> None:
        self._fs(uri).delete(self._path(uri), True)

    def rename(self, source: str, target: str) -> None:
        if not self._fs(source).rename(self._path(source), self._path(target)):
            raise OSError(f"could not rename {source} to {target}")

    def mkdirs(self, uri: str) -> None:
        self._fs(uri).mkdirs(self._path(uri))

    def glob(self, pattern: str) -> list[str]:
        found = self._fs(pattern).globStatus(self._path(pattern))
        return [status.getPath().toString() for status in (found or [])]

    def write_text(self, uri: str, text: str) -> None:
        stream = self._fs(uri).create(self._path(uri), True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()


# -- sinks ---------------------------------------------------------------------


class ParquetSink:
    """``<output>/<job id>/topic=<t>/partition=<p>/*.parquet``.

    Staged as ``<output>/_staging/<job id>-<attempt>/``; published by two
    renames (old output aside, staging in), then the old output is deleted.
    Killed anywhere in between, the job is not marked done, and the next
    attempt removes this job's stale staging folders before it starts.
    """

    needs_publish = True

    def __init__(self, spark: SparkSession, *, output: str, job_id: str, attempt: str) -> None:
        self.spark = spark
        self.files = HadoopFiles(spark)
        base = output.rstrip("/")
        self.final = f"{base}/{job_id}"
        self.staging = f"{base}/_staging/{job_id}-{attempt}"
        self._replaced = f"{base}/_staging/{job_id}-{attempt}.replaced"
        self._stale_pattern = f"{base}/_staging/{job_id}-*"

    def describe(self) -> dict:
        return {"kind": "parquet", "output": self.final}

    def prepare(self) -> None:
        for stale in self.files.glob(self._stale_pattern):
            self.files.delete(stale)
        # A leftover ".replaced" copy means an earlier attempt died between
        # its two renames; the next publish replaces the output anyway.

    def write(self, records: DataFrame) -> None:
        # Timestamps as plain INT64 milliseconds (Kafka's precision), readable by any Parquet reader.
        self.spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
        records.select(*RECORD_COLUMNS).write.mode("errorifexists").partitionBy("topic", "partition").parquet(
            self.staging
        )

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        stored = self.spark.read.schema(PARQUET_SCHEMA).option("basePath", self.staging).parquet(self.staging)
        return summarize_offsets(self.spark, stored.select("topic", "partition", "offset"), ranges)

    def publish(self, manifest: dict) -> None:
        self.files.write_text(f"{self.staging}/{MANIFEST_NAME}", json.dumps(manifest, indent=2, sort_keys=True))
        if self.files.exists(self.final):
            self.files.rename(self.final, self._replaced)
        self.files.rename(self.staging, self.final)
        if self.files.exists(self._replaced):
            self.files.delete(self._replaced)

    def discard(self) -> None:
        if self.files.exists(self.staging):
            self.files.delete(self.staging)


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

    def describe(self) -> dict:
        return {"kind": "kafka", "topics": self.topics}

    def prepare(self) -> None:
        pass

    def write(self, records: DataFrame) -> None:
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
        (
            records.select(
                replay_topic.alias("topic"), F.col("partition"), F.col("key"), F.col("value"),
                F.concat(original, added).alias("headers"),
            )
            # append: the only save mode of the DataSource V2 Kafka writer (session.V1_SOURCES).
            .write.format("kafka").mode("append").options(**self.kafka_options)
            # Idempotent producer: no duplicates from retries, order kept per partition.
            .option("kafka.enable.idempotence", "true").option("kafka.acks", "all")
            .option("kafka.linger.ms", "20").option("kafka.batch.size", str(512 * 1024))
            .save()
        )

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
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


def load_handler(dotted: str) -> Callable[[Iterator[dict]], Any]:
    """``package.module.function`` or ``package.module:function``."""
    module_name, _, attribute = dotted.partition(":") if ":" in dotted else dotted.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"handler {dotted!r} is not a dotted path to a function")
    handler = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(handler):
        raise ValueError(f"handler {dotted!r} is not a callable")
    return handler


def _handler_partition(dotted: str) -> Callable[[Iterator[Any]], Iterator[tuple]]:
    def run(rows: Iterator[Any]) -> Iterator[tuple]:
        handler = load_handler(dotted)
        # Runs of consecutive offsets per (topic, partition), counted as the
        # handler pulls each record: what it did not pull was not delivered.
        runs: dict[tuple[str, int], list[list[int]]] = {}
        pulled: dict[tuple[str, int], int] = {}

        def records() -> Iterator[dict]:
            for row in rows:
                key = (row.topic, row.partition)
                pulled[key] = pulled.get(key, 0) + 1
                spans = runs.setdefault(key, [])
                if spans and spans[-1][1] == row.offset:
                    spans[-1][1] = row.offset + 1
                else:
                    spans.append([row.offset, row.offset + 1])
                yield {
                    "key": bytes(row.key) if row.key is not None else None,
                    "value": bytes(row.value) if row.value is not None else None,
                    "topic": row.topic, "partition": row.partition, "offset": row.offset,
                    "timestamp": row.timestamp,
                    "headers": [(h.key, bytes(h.value) if h.value is not None else None) for h in row.headers or []],
                }

        handler(records())
        for (topic, partition), spans in runs.items():
            yield topic, partition, pulled[(topic, partition)], [tuple(span) for span in spans]

    return run


class HandlerSink:
    """A Python function called once per Spark partition as
    ``handler(records)``, ``records`` an iterator of dicts with key, value
    (bytes or None), topic, partition, offset, timestamp (datetime) and
    headers (list of (name, bytes)). At least once: Spark re-runs a failed
    task, and a re-run of the job calls the handler again."""

    needs_publish = False

    def __init__(self, spark: SparkSession, *, handler: str) -> None:
        self.spark = spark
        self.handler = handler
        self._results: list[tuple] = []

    def describe(self) -> dict:
        return {"kind": "handler", "handler": self.handler}

    def prepare(self) -> None:
        load_handler(self.handler)  # fail before reading anything

    def write(self, records: DataFrame) -> None:
        self._results = records.select(*RECORD_COLUMNS).rdd.mapPartitions(_handler_partition(self.handler)).collect()

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        return handler_summaries(self._results, ranges)

    def publish(self, manifest: dict) -> None:
        pass

    def discard(self) -> None:
        pass
