"""The Spark job's spec rules that need no Spark: validation and how a read is split into tasks."""

from __future__ import annotations

import pytest

from tasks.spark.reader import min_partitions
from tasks.spark.spec import SpecError, parse_spec


def spec(ranges, *, sink=None, records_per_task=200_000) -> dict:
    return {"job_id": "7", "attempt": "a1", "kafka": {"bootstrap_servers": "b:9092"}, "ranges": ranges,
            "sink": sink or {"kind": "parquet", "output": "/tmp/out"},
            "spark": {"jars_dir": "/jars", "records_per_task": records_per_task},
            "progress_file": "/tmp/p.json", "result_file": "/tmp/r.json"}


def one_range(count: int) -> list[dict]:
    return [{"topic": "t", "partition": 0, "start": 0, "end": count}]


@pytest.mark.parametrize("count, parallelism, expected, why", [
    (1_000_000, 2, 6, "5 tasks of 200k rounded up to a multiple of 2 cores"),
    (1_000_000, 1, 5, "one core: one task per 200k records"),
    (1_000_000, 8, 8, "a cluster with 8 cores gets 8 tasks"),
    (400_000, 2, 2, "already a multiple"),
    (150_000, 2, None, "one task per Kafka partition is enough"),
    (200_001, 4, 4, "2 tasks wanted, rounded up to 4"),
])
def test_it_splits_a_big_range_into_a_multiple_of_the_cores(count, parallelism, expected, why):
    assert min_partitions(parse_spec(spec(one_range(count))), parallelism) == expected, why


def test_it_keeps_one_task_per_partition_when_replaying_to_kafka_so_order_is_kept():
    replay = {"kind": "kafka", "topics": {"t": "t.replay"}, "start_offsets": {"t.replay": {"0": 0}}}
    assert min_partitions(parse_spec(spec(one_range(5_000_000), sink=replay)), 2) is None


def test_it_does_not_split_when_there_are_more_partitions_than_tasks_wanted():
    ranges = [{"topic": "t", "partition": p, "start": 0, "end": 125_000} for p in range(8)]
    assert min_partitions(parse_spec(spec(ranges)), 2) is None


@pytest.mark.parametrize("ranges, message", [
    ([], "spec.ranges must not be empty"),
    (one_range(0), "0 <= start < end"),
    ([{"topic": "t", "partition": 0, "start": 5, "end": 9}] * 2, "appears twice"),
    ([{"topic": "t", "partition": -1, "start": 0, "end": 9}], "partition >= 0"),
])
def test_it_refuses_a_bad_range_naming_the_field(ranges, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec(ranges))
