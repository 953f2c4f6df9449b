"""The Parquet sink: staged, counted, then published in place."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from groups.domain.planning import BackfillRange
from adapters.spark.offset_check import FileFooter, proven_summaries
from adapters.spark.sinks.files import OutputFiles
from adapters.spark.sinks.columns import PARQUET_SCHEMA, RECORD_COLUMNS
from adapters.spark.sinks.summary import FOOTERS, READ_BACK, ObservedChecksum, summarize_offsets

MANIFEST_NAME = "_gapwatch.json"
# Output files a task writes at once before Spark falls back to sorting its rows.
CONCURRENT_WRITERS = 4
# Parquet's writer settings per column (parquet-java's "<setting>#<column>"),
# for what the columns hold: the key, the value and the headers are opaque
# bytes, mostly distinct, so no dictionary (each value hashed and compared
# until the dictionary overflows, per row group) and no min/max statistics
# (each value compared byte by byte); the offset is distinct too. The
# offset's statistics stay: the verification reads them from the footers.
OPAQUE_COLUMNS = ("key", "value", "headers.list.element.key", "headers.list.element.value")
WRITER_OPTIONS = {
    **{f"parquet.enable.dictionary#{column}": "false" for column in (*OPAQUE_COLUMNS, "offset")},
    **{f"parquet.column.statistics.enabled#{column}": "false" for column in OPAQUE_COLUMNS},
    "parquet.size.statistics.enabled": "false",
}


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
        self._observed = None
        self.verified_by = ""

    def describe(self) -> dict:
        return {"kind": "parquet", "output": self.final}

    def prepare(self) -> None:
        for stale in self.files.siblings(self._staging_folder, self._stale_prefix):
            self.files.delete(stale)
        # A leftover ".replaced" copy means an earlier attempt died between
        # its two renames; the next publish replaces the output anyway.

    def write(self, records: DataFrame) -> None:
        """One pass: the records into staging, and the write's own count and
        checksum of the offsets (``offset_check``), observed by Spark as
        they pass."""
        # Timestamps as plain INT64 milliseconds (Kafka's precision), readable by any Parquet reader.
        self.spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
        # Each task holds one partition's records: with a writer per folder kept open, Spark does not sort
        # every row by (topic, partition) before writing it (its default for a partitioned write).
        self.spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", str(CONCURRENT_WRITERS))
        observation = ObservedChecksum(self.spark)
        records.select(*RECORD_COLUMNS).observe(observation.observation, *observation.columns).write.mode(
            "error").options(**WRITER_OPTIONS).partitionBy("topic", "partition").parquet(self.staging)
        self._observed = observation.result()

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        """Proven from the files' footers and the write's checksum when the
        staging holds every offset once (``offset_check.proven_summaries``);
        otherwise counted by reading the staging back, which also locates
        each hole and duplicate."""
        footers = [FileFooter(topic=levels.get("topic", ""), partition=_partition(levels.get("partition", "")),
                              rows=rows, low=low, high=high)
                   for levels, rows, low, high in self.files.parquet_footers(self.staging, "offset")]
        proven = proven_summaries(ranges, footers, self._observed)
        if proven is not None:
            self.verified_by = FOOTERS
            return proven
        self.verified_by = READ_BACK
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


def _partition(level: str) -> int:
    """A ``partition=<p>`` folder's partition; -1 (in no range) for anything else."""
    return int(level) if level.isdigit() else -1
