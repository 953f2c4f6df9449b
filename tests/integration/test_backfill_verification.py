"""The Parquet sink's verification on a real Spark Connect server: a staging
folder that holds every offset once is proven from its files' footers and
the write's own checksum, without reading it back; a partial write (a file
gone), a duplicate (a file copied, or an offset written twice in place of
another) and a record lost on the way are each caught, and then located by
reading the staging back. The records are made by Spark (no Kafka needed:
the subject is what the sink holds, not the read)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from groups.domain.planning import BackfillRange
from adapters.spark.sinks.parquet import ParquetSink
from adapters.spark.sinks.summary import FOOTERS, READ_BACK
from tests.harness.backfills import spark_records

TOPIC = "orders.verify"
RECORDS = 300
# Three Spark tasks per partition, so three files per folder: [0, 100), [100, 200), [200, 300).
TASKS = 3
RANGES = (BackfillRange(TOPIC, 0, 0, RECORDS), BackfillRange(TOPIC, 1, 0, RECORDS))


def records(spark, offset_expression: str = "id"):
    """RECORDS records of partitions 0 and 1, in TASKS tasks per partition."""
    return spark_records(spark, TOPIC, records=RECORDS, tasks=TASKS, offset_expression=offset_expression)


def written(spark, tmp_path: Path, offset_expression: str = "id") -> ParquetSink:
    sink = ParquetSink(spark, output=str(tmp_path / "out"), job_id="verify", attempt="a1")
    sink.prepare()
    sink.write(records(spark, offset_expression))
    return sink


def data_files(sink: ParquetSink, partition: int) -> list[Path]:
    return sorted((Path(sink.staging) / f"topic={TOPIC}" / f"partition={partition}").glob("*.parquet"))


def by_partition(summaries: list[dict]) -> dict[int, dict]:
    return {s["partition"]: s for s in summaries}


@pytest.mark.spark
def test_it_proves_a_complete_write_from_its_footers_and_checksum_without_reading_it_back(spark, tmp_path):
    sink = written(spark, tmp_path)
    assert len(data_files(sink, 0)) == TASKS

    summaries = by_partition(sink.summarize(RANGES))

    assert sink.verified_by == FOOTERS
    for partition in (0, 1):
        assert summaries[partition]["delivered"] == RECORDS
        assert (summaries[partition]["missing"], summaries[partition]["duplicates"]) == (0, 0)


@pytest.mark.spark
def test_it_catches_a_partial_write_and_locates_the_missing_file(spark, tmp_path):
    sink = written(spark, tmp_path)
    data_files(sink, 1)[1].unlink()  # the file of offsets [100, 200)

    summaries = by_partition(sink.summarize(RANGES))

    assert sink.verified_by == READ_BACK
    assert summaries[1]["missing"] == 100 and summaries[1]["holes"] == [[100, 200]]
    assert summaries[0]["missing"] == 0


@pytest.mark.spark
def test_it_catches_a_file_written_twice(spark, tmp_path):
    sink = written(spark, tmp_path)
    first = data_files(sink, 0)[0]
    shutil.copy(first, first.with_name("part-99999-copy.c000.snappy.parquet"))

    summaries = by_partition(sink.summarize(RANGES))

    assert sink.verified_by == READ_BACK
    assert summaries[0]["duplicates"] == 100 and summaries[0]["missing"] == 0


@pytest.mark.spark
def test_it_catches_a_record_lost_on_the_way_to_the_files(spark, tmp_path):
    sink = ParquetSink(spark, output=str(tmp_path / "out"), job_id="verify", attempt="a1")
    sink.prepare()
    sink.write(records(spark).where("not (partition = 0 and offset = 157)"))

    summaries = by_partition(sink.summarize(RANGES))

    assert sink.verified_by == READ_BACK
    assert summaries[0]["missing"] == 1 and summaries[0]["holes"] == [[157, 158]]


@pytest.mark.spark
def test_the_checksum_catches_a_duplicate_that_hides_a_hole_from_the_footers(spark, tmp_path):
    # 157 written as a second 158: every file still has as many rows as offsets
    # it spans, from the same least to the same greatest offset.
    sink = written(spark, tmp_path, offset_expression="case when id = 157 then 158 else id end")

    summaries = by_partition(sink.summarize(RANGES))

    assert sink.verified_by == READ_BACK
    for partition in (0, 1):
        assert summaries[partition]["duplicates"] == 1 and summaries[partition]["holes"] == [[157, 158]]


@pytest.mark.spark
def test_the_files_keep_statistics_for_the_offset_only_and_no_dictionary_for_the_opaque_columns(spark, tmp_path):
    import pyarrow.parquet as pq

    sink = written(spark, tmp_path)
    metadata = pq.ParquetFile(data_files(sink, 0)[0]).metadata
    columns = {metadata.row_group(0).column(i).path_in_schema: metadata.row_group(0).column(i)
               for i in range(metadata.num_columns)}

    assert set(columns) >= {"key", "value", "offset", "headers.list.element.key", "headers.list.element.value"}
    assert columns["offset"].statistics.has_min_max  # what the verification reads
    for path in ("key", "value", "headers.list.element.key", "headers.list.element.value"):
        stats = columns[path].statistics
        assert stats is None or not stats.has_min_max, path
    for path in ("key", "value", "offset"):
        assert not any("DICTIONARY" in encoding for encoding in columns[path].encodings), (path, columns[path].encodings)
