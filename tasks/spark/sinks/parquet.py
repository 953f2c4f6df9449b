"""The Parquet sink: staged, counted, then published in place."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from groups.domain.planning import BackfillRange
from tasks.spark.sinks.files import OutputFiles
from tasks.spark.sinks.records import PARQUET_SCHEMA, RECORD_COLUMNS
from tasks.spark.sinks.summary import summarize_offsets

MANIFEST_NAME = "_gapwatch.json"


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
