"""The handler sink: a Python function an administrator listed, called once
per Spark partition."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from groups.domain.planning import BackfillRange
from adapters.spark.counting import handler_summaries
from adapters.spark.session import is_connect
from adapters.spark.sinks.code_archive import code_archive
from adapters.spark.sinks.handler_call import HANDLER_RESULT_SCHEMA, handler_partition, load_handler
from adapters.spark.sinks.columns import RECORD_COLUMNS


class HandlerSink:
    """A Python function called once per Spark partition as
    ``handler(records)``, ``records`` an iterator of dicts with key, value
    (bytes or None), topic, partition, offset, timestamp (datetime) and
    headers (list of (name, bytes)). At least once: Spark re-runs a failed
    task, and a re-run of the job calls the handler again."""

    needs_publish = False
    # What the handler pulled from its iterators, counted as it pulled them.
    verified_by = "the handler's own count"

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
        rows = records.select(*RECORD_COLUMNS).mapInArrow(handler_partition(self.handler),
                                                           HANDLER_RESULT_SCHEMA).collect()
        self._results = [(row.topic, row.partition, row.pulled, [tuple(span) for span in json.loads(row.runs)])
                         for row in rows]

    def summarize(self, ranges: Sequence[BackfillRange]) -> list[dict]:
        return handler_summaries(self._results, ranges)

    def publish(self, manifest: dict) -> None:
        pass

    def discard(self) -> None:
        pass
