"""The Spark job's spec (adapters.spark.spec), which needs no Spark: the typed
spec and its JSON form, validation, and how a read is split into tasks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from groups.domain.planning import BackfillRange
from adapters.spark.spec import JobSpec, KafkaSettings, SinkSpec, SpecError, min_partitions, parse_spec

ROOT = Path(__file__).resolve().parents[2]


def spec(ranges, *, sink=None, records_per_task=200_000) -> dict:
    return {"job_id": "7", "attempt": "a1", "kafka": {"bootstrap_servers": "b:9092"}, "ranges": ranges,
            "sink": sink or {"kind": "parquet", "output": "/tmp/out"},
            "spark": {"jars_dir": "/jars", "records_per_task": records_per_task},
            "progress_file": "/tmp/p.json", "result_file": "/tmp/r.json"}


def one_range(count: int) -> list[dict]:
    return [{"topic": "t", "partition": 0, "start": 0, "end": count}]


@pytest.mark.parametrize("count, parallelism, expected, why", [
    (1_000_000, 2, 6, "5 tasks of 200k rounded up to a multiple of 2 cores"),
    (1_000_000, 1, 4, "one core: 4 tasks at most, of 250k"),
    (600_000, 1, 3, "one core: one task per 200k records below that"),
    (1_000_000, 8, 8, "a cluster with 8 cores gets 8 tasks"),
    (400_000, 2, 2, "already a multiple"),
    (150_000, 2, None, "one task per Kafka partition is enough"),
    (200_001, 4, 4, "2 tasks wanted, rounded up to 4"),
    (1_600_000, 2, 8, "8 tasks of 200k: 4 per core, the most"),
    (1_600_001, 2, 8, "9 tasks of 200k wanted: 4 per core at most, so 8 larger ones"),
    (10_000_000, 2, 8, "a big job: 8 tasks of 1.25M, not 50 of 200k"),
    (10_000_000, 3, 12, "4 per core on 3 cores"),
    (10_000_000, 0, 4, "no core reported: counted as one"),
])
def test_it_splits_a_big_range_into_a_multiple_of_the_cores(count, parallelism, expected, why):
    assert min_partitions(parse_spec(spec(one_range(count))), parallelism) == expected, why


def test_a_spec_may_allow_more_tasks_per_core_for_a_range_read_in_small_tasks():
    # 60,000 records in tasks of 2,000 on 2 cores: 30 tasks wanted; 8 by default, all 30 when allowed.
    small = {**spec(one_range(60_000), records_per_task=2_000)}
    assert min_partitions(parse_spec(small), 2) == 8
    small["spark"] = {**small["spark"], "tasks_per_core": 1_000}
    assert min_partitions(parse_spec(small), 2) == 30


def test_it_keeps_one_task_per_partition_when_replaying_to_kafka_so_order_is_kept():
    replay = {"kind": "kafka", "topics": {"t": "t.replay"}, "start_offsets": {"t.replay": {"0": 0}}}
    assert min_partitions(parse_spec(spec(one_range(5_000_000), sink=replay)), 2) is None


def test_it_does_not_split_when_the_partitions_are_as_many_as_the_tasks_allowed():
    ranges = [{"topic": "t", "partition": p, "start": 0, "end": 2_500_000} for p in range(8)]
    assert min_partitions(parse_spec(spec(ranges)), 2) is None, "8 partitions, 100 tasks wanted, 8 allowed"


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


# --- the typed spec: one contract for the runner that writes it and the job that reads it


def typed(**changes) -> JobSpec:
    fields = {"job_id": "7", "attempt": "a1", "kafka": KafkaSettings("b:9092"),
              "ranges": (BackfillRange("t", 0, 0, 10),), "sink": SinkSpec("parquet", output="/tmp/out"),
              "jars_dir": "/jars", "progress_file": "/tmp/p.json", "result_file": "/tmp/r.json"}
    return JobSpec(**{**fields, **changes})


@pytest.mark.parametrize("sink", [
    SinkSpec("parquet", output="hdfs://nn/backfills"),
    SinkSpec("kafka", topics={"t": "t.replay", "u": "u.replay"},
             start_offsets={"t.replay": {"0": 4, "1": 0}, "u.replay": {"3": 0}}),
    SinkSpec("handler", handler="package.module.function"),
])
def test_a_spec_survives_its_json_form_unchanged(sink):
    written = typed(kafka=KafkaSettings("b:9092", "SASL_SSL", "SCRAM-SHA-512", "backfill"),
                    ranges=(BackfillRange("u", 3, 5, 9), BackfillRange("t", 1, 0, 10)), sink=sink,
                    master="spark://m:7077", driver_memory="2g", records_per_task=50, tasks_per_core=100,
                    kafka_timeout_ms=15_000)
    text = json.dumps(written.to_json())
    assert JobSpec.from_json(json.loads(text)) == written
    assert "password" not in text.lower()


def test_the_ranges_are_kept_sorted_by_topic_and_partition():
    spec = typed(ranges=(BackfillRange("u", 0, 0, 1), BackfillRange("t", 2, 0, 1), BackfillRange("t", 1, 0, 1)))
    assert [(r.topic, r.partition) for r in spec.ranges] == [("t", 1), ("t", 2), ("u", 0)]
    assert spec.total == 3


def test_optional_fields_get_their_defaults():
    parsed = parse_spec(spec(one_range(10)))
    assert (parsed.master, parsed.driver_memory, parsed.records_per_task, parsed.tasks_per_core,
            parsed.kafka_timeout_ms) == ("local[*]", "768m", 200_000, 4, 120_000)
    assert parsed.kafka == KafkaSettings("b:9092", "PLAINTEXT", "", "")


@pytest.mark.parametrize("changes, message", [
    ({"ranges": ()}, "spec.ranges must not be empty"),
    ({"ranges": (BackfillRange("t", 0, 4, 4),)}, "0 <= start < end"),
    ({"attempt": ""}, "spec.attempt must be a non-empty str"),
    ({"records_per_task": 0}, "records_per_task must be a positive integer"),
    ({"records_per_task": True}, "records_per_task must be a positive integer"),
    ({"tasks_per_core": 0}, "tasks_per_core must be a positive integer"),
    ({"tasks_per_core": True}, "tasks_per_core must be a positive integer"),
    ({"kafka_timeout_ms": 0}, "kafka_timeout_ms must be a positive integer"),
    ({"kafka_timeout_ms": True}, "kafka_timeout_ms must be a positive integer"),
    ({"sink": SinkSpec("kafka", topics={"other": "o.replay"}, start_offsets={"o.replay": {}})},
     r"no replay topic for \['t'\]"),
])
def test_the_writer_cannot_build_a_spec_the_job_would_refuse(changes, message):
    with pytest.raises(SpecError, match=message):
        typed(**changes)


@pytest.mark.parametrize("sink, message", [
    ({"kind": "s3"}, "spec.sink.kind must be one of parquet, kafka, handler, got 's3'"),
    ({"kind": "parquet"}, "spec.sink.output must be a non-empty str"),
    ({"kind": "handler", "handler": ""}, "spec.sink.handler must be a non-empty str"),
    ({"kind": "kafka", "topics": {"t": "t.replay"}, "start_offsets": {}}, "start offsets of every replay topic"),
    ({"kind": "kafka", "topics": {"t": "t.replay"}}, "spec.sink.start_offsets must be a dict"),
])
def test_it_refuses_a_bad_sink_naming_the_field(sink, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(spec(one_range(5), sink=sink))


@pytest.mark.parametrize("mutate, message", [
    (lambda data: data.pop("job_id"), "spec.job_id must be a non-empty str"),
    (lambda data: data["ranges"][0].update(start="0"), "spec.ranges[0].start must be a int"),
    (lambda data: data["ranges"][0].update(partition=True), "spec.ranges[0].partition must be a int"),
    (lambda data: data["kafka"].pop("bootstrap_servers"), "spec.kafka.bootstrap_servers must be a non-empty str"),
    (lambda data: data.update(spark=[]), "spec.spark must be an object"),
])
def test_it_refuses_json_of_the_wrong_type_naming_the_field(mutate, message):
    data = spec(one_range(5))
    mutate(data)
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(data)


def test_it_refuses_what_is_not_an_object():
    with pytest.raises(SpecError, match="spec must be a JSON object"):
        parse_spec([1, 2])


def test_the_spec_loads_without_django_or_spark():
    """The runner (in a Celery worker) and the Spark job both import it."""
    probe = ("import sys, adapters.spark.spec, adapters.spark.counting; "
             "print(sorted(m for m in ('django', 'pyspark') if m in sys.modules))")
    answer = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "[]"


@pytest.mark.parametrize("isolation, why", [
    ("read_committed", "the default, and what an undeclared group's backfill reads"),
    ("read_uncommitted", "a group that declared read_uncommitted read aborted records too"),
])
def test_the_isolation_level_travels_in_the_spec(isolation, why):
    written = typed(isolation=isolation)
    assert JobSpec.from_json(json.loads(json.dumps(written.to_json()))).isolation == isolation, why


def test_a_spec_without_an_isolation_reads_committed_and_a_bad_one_is_refused():
    assert parse_spec(spec(one_range(5))).isolation == "read_committed"
    with pytest.raises(SpecError, match="spec.isolation must be one of read_committed, read_uncommitted"):
        parse_spec({**spec(one_range(5)), "isolation": "unknown"})
