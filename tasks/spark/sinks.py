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
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
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
from tasks.spark.session import is_connect, sql_api

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
    F, Window = sql_api(spark)  # noqa: N806 - the usual names of pyspark's API
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


# -- output storage (local folders, and the URIs pyarrow.fs knows) -----------


class OutputFiles:
    """The few file operations the Parquet sink needs, through
    ``pyarrow.fs``, done by the job's driver side: in a Spark Connect client
    that is the Celery worker's process, so the output location must be one
    that the worker and Spark's executors share (a local or network folder,
    ``hdfs://``, ``s3://``/``s3a://``, ``gs://``)."""

    def __init__(self) -> None:
        self._fs: dict[str, tuple] = {}

    def _resolve(self, uri: str):
        from pyarrow import fs

        if "://" not in uri:
            return fs.LocalFileSystem(), str(Path(uri).absolute())
        scheme, _, rest = uri.partition("://")
        if scheme == "file":
            return fs.LocalFileSystem(), "/" + rest.lstrip("/")
        # Hadoop's S3 connector is s3a://; pyarrow's is s3://, the same buckets.
        filesystem, path = fs.FileSystem.from_uri(("s3" if scheme == "s3a" else scheme) + "://" + rest)
        return filesystem, path

    def _info(self, uri: str):
        filesystem, path = self._resolve(uri)
        return filesystem, path, filesystem.get_file_info(path)

    def exists(self, uri: str) -> bool:
        from pyarrow import fs

        return self._info(uri)[2].type != fs.FileType.NotFound

    def delete(self, uri: str) -> None:
        from pyarrow import fs

        filesystem, path, info = self._info(uri)
        if info.type == fs.FileType.Directory:
            filesystem.delete_dir(path)
        elif info.type != fs.FileType.NotFound:
            filesystem.delete_file(path)

    def rename(self, source: str, target: str) -> None:
        """A move; where the file system cannot move a folder (object stores:
        Arrow's S3 refuses), a copy of every file, then the source deleted,
        as Hadoop's s3a rename does."""
        from pyarrow import fs

        filesystem, source_path = self._resolve(source)
        target_path = self._resolve(target)[1]
        try:
            filesystem.move(source_path, target_path)
            return
        except NotImplementedError:
            pass
        for info in filesystem.get_file_info(fs.FileSelector(source_path, recursive=True)):
            if info.type == fs.FileType.File:
                copy = target_path + info.path[len(source_path):]  # listed in the form source_path was given
                filesystem.create_dir(copy.rsplit("/", 1)[0], recursive=True)
                filesystem.copy_file(info.path, copy)
        filesystem.delete_dir(source_path)

    def siblings(self, folder: str, prefix: str) -> list[str]:
        """Entries of ``folder`` whose names start with ``prefix``, as URIs under ``folder``."""
        from pyarrow import fs

        filesystem, path = self._resolve(folder)
        try:
            found = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        except FileNotFoundError:
            return []
        return [f"{folder.rstrip('/')}/{info.base_name}" for info in found if info.base_name.startswith(prefix)]

    def write_text(self, uri: str, text: str) -> None:
        filesystem, path = self._resolve(uri)
        with filesystem.open_output_stream(path) as stream:
            stream.write(text.encode())


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
        self.files = OutputFiles()
        base = output.rstrip("/")
        self.final = f"{base}/{job_id}"
        self._staging_folder = f"{base}/_staging"
        self.staging = f"{self._staging_folder}/{job_id}-{attempt}"
        self._replaced = f"{self._staging_folder}/{job_id}-{attempt}.replaced"
        self._stale_prefix = f"{job_id}-"

    def describe(self) -> dict:
        return {"kind": "parquet", "output": self.final}

    def prepare(self) -> None:
        for stale in self.files.siblings(self._staging_folder, self._stale_prefix):
            self.files.delete(stale)
        # A leftover ".replaced" copy means an earlier attempt died between
        # its two renames; the next publish replaces the output anyway.

    def write(self, records: DataFrame) -> None:
        # Timestamps as plain INT64 milliseconds (Kafka's precision), readable by any Parquet reader.
        self.spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
        records.select(*RECORD_COLUMNS).write.mode("error").partitionBy("topic", "partition").parquet(
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


def load_handler(dotted: str) -> Callable[[Iterator[dict]], Any]:
    """``package.module.function`` or ``package.module:function``."""
    module_name, _, attribute = dotted.partition(":") if ":" in dotted else dotted.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"handler {dotted!r} is not a dotted path to a function")
    handler = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(handler):
        raise ValueError(f"handler {dotted!r} is not a callable")
    return handler


HANDLER_RESULT_SCHEMA = "topic string, partition int, pulled long, runs string"


def _handler_partition(dotted: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on each Spark partition (Arrow
    batches of RECORD_COLUMNS): it calls the handler with the records as
    dicts and yields, per (topic, partition), how many records the handler
    pulled and the runs of consecutive offsets it pulled (JSON)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        handler = load_handler(dotted)
        # Counted as the handler pulls each record: what it did not pull was not delivered.
        runs: dict[tuple[str, int], list[list[int]]] = {}
        pulled: dict[tuple[str, int], int] = {}

        def records() -> Iterator[dict]:
            for batch in batches:
                for row in batch.to_pylist():
                    key = (row["topic"], row["partition"])
                    pulled[key] = pulled.get(key, 0) + 1
                    spans = runs.setdefault(key, [])
                    if spans and spans[-1][1] == row["offset"]:
                        spans[-1][1] = row["offset"] + 1
                    else:
                        spans.append([row["offset"], row["offset"] + 1])
                    yield {
                        "key": row["key"], "value": row["value"], "topic": row["topic"],
                        "partition": row["partition"], "offset": row["offset"], "timestamp": row["timestamp"],
                        "headers": [(h["key"], h["value"]) for h in row["headers"] or []],
                    }

        handler(records())
        keys = sorted(runs)
        yield pa.RecordBatch.from_pydict({
            "topic": [topic for topic, _ in keys],
            "partition": pa.array([partition for _, partition in keys], pa.int32()),
            "pulled": pa.array([pulled[key] for key in keys], pa.int64()),
            "runs": [json.dumps(runs[key]) for key in keys],
        })

    return run


PROJECT = Path(__file__).resolve().parents[2]
# What the handler sink's Python workers import: this package (the function
# mapInArrow runs is pickled by reference to tasks.spark.sinks) and the pure
# modules it imports.
JOB_PACKAGES = ("tasks/spark", "groups/domain")


def code_archive(handler: str, folder: Path) -> Path:
    """A zip of JOB_PACKAGES and, when it lives in this project, the
    handler's module (with the ``__init__.py`` of its packages), for a Spark Connect session's Python
    workers (``addArtifacts(pyfile=True)``): executors on a cluster have
    neither. A handler installed elsewhere must be installed on the
    cluster's Python too."""
    import importlib.util
    import zipfile

    roots = [PROJECT / package for package in JOB_PACKAGES]
    module = handler.partition(":")[0] if ":" in handler else handler.rpartition(".")[0]
    found = importlib.util.find_spec(module)
    origin = Path(found.origin).resolve() if found and found.origin else None
    if origin and PROJECT in origin.parents:
        roots.append(origin.parent if origin.name == "__init__.py" else origin)
    archive = folder / "gapwatch-job-code.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for root in roots:
            files = [root] if root.is_file() else sorted(root.rglob("*.py"))
            for file in files:
                bundle.write(file, file.relative_to(PROJECT))
            # Every package on the way down needs its __init__.py.
            for parent in (root if root.is_dir() else root.parent, *(root if root.is_dir() else root.parent).parents):
                if parent == PROJECT or PROJECT not in parent.parents:
                    break
                init = parent / "__init__.py"
                if init.exists() and str(init.relative_to(PROJECT)) not in bundle.namelist():
                    bundle.write(init, init.relative_to(PROJECT))
    return archive


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
        if is_connect(self.spark):
            import tempfile

            with tempfile.TemporaryDirectory(prefix="gapwatch-code-") as folder:
                self.spark.addArtifacts(str(code_archive(self.handler, Path(folder))), pyfile=True)

    def write(self, records: DataFrame) -> None:
        rows = records.select(*RECORD_COLUMNS).mapInArrow(_handler_partition(self.handler),
                                                           HANDLER_RESULT_SCHEMA).collect()
        self._results = [(row.topic, row.partition, row.pulled, [tuple(span) for span in json.loads(row.runs)])
                         for row in rows]

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        return handler_summaries(self._results, ranges)

    def publish(self, manifest: dict) -> None:
        pass

    def discard(self) -> None:
        pass
