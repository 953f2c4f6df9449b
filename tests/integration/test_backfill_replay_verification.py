"""The kafka sink's verification on a real Spark Connect server and a real
broker: a replay that holds every offset once is proven from where each
replay partition ends, reading one record per partition; a write that
stopped early, a duplicate (what a retried Spark task leaves) and a lost
record whose place another writer's took are each caught, and then located
by reading the replay back; so is a replay whose counts hold while the
source lost the start of its range (a record the read skipped and a
duplicate). The records written are made by Spark (the subject is what the
replay topic holds, not the read of the source); the source topic holds the
same offsets, for the proof's check that it still holds each range's start."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from groups.domain.planning import BackfillRange
from adapters.spark.reader import kafka_options
from adapters.spark.sinks.kafka import KafkaSink
from adapters.spark.sinks.summary import END_OFFSETS, READ_BACK
from adapters.spark.spec import KafkaSecrets, KafkaSettings
from tests.harness.backfills import spark_records

RECORDS = 300
TASKS = 3
# Another writer's records in the replay topic before the job: the job counts from where it began.
BEFORE = {0: 5, 1: 3}


@pytest.fixture
def topics(broker, unique):
    """(source, replay): the source with RECORDS records in each of 2 partitions; the replay topic made
    with 2 partitions and BEFORE records of another writer."""
    source, replay = f"orders.replay-verify-{unique}", f"orders.replay-verify-{unique}.replay"
    broker.create_topic(source, 2)
    for partition in (0, 1):
        broker.produce(source, partition, RECORDS)
    broker.create_topic(replay, 2)
    for partition, count in BEFORE.items():
        broker.produce(replay, partition, count, prefix="other")
    return source, replay


def records(spark, source: str):
    """RECORDS records of partitions 0 and 1 of ``source``, in TASKS tasks per partition."""
    return spark_records(spark, source, records=RECORDS, tasks=TASKS)


def sink_of(spark, broker, topics) -> KafkaSink:
    source, replay = topics
    return KafkaSink(spark, kafka_options=kafka_options(KafkaSettings(broker.bootstrap), KafkaSecrets()),
                     topics={source: replay}, start_offsets={replay: {str(p): n for p, n in BEFORE.items()}},
                     job_id="verify", attempt="a1")


def ranges(topics) -> list[BackfillRange]:
    return [BackfillRange(topics[0], partition, 0, RECORDS) for partition in (0, 1)]


def by_partition(summaries: list[dict]) -> dict[int, dict]:
    return {s["partition"]: s for s in summaries}


@pytest.mark.spark
def test_it_proves_a_complete_replay_from_its_ends_and_checksum_without_reading_it_back(spark, broker, topics):
    sink = sink_of(spark, broker, topics)
    sink.write(records(spark, topics[0]))

    summaries = by_partition(sink.summarize(ranges(topics)))

    assert sink.verified_by == END_OFFSETS
    for partition in (0, 1):
        assert summaries[partition]["delivered"] == RECORDS
        assert (summaries[partition]["missing"], summaries[partition]["duplicates"]) == (0, 0)


@pytest.mark.spark
def test_it_catches_a_replay_that_stopped_early_and_locates_the_missing_records(spark, broker, topics):
    sink = sink_of(spark, broker, topics)
    sink.write(records(spark, topics[0]).where("not (partition = 1 and offset >= 250)"))

    summaries = by_partition(sink.summarize(ranges(topics)))

    assert sink.verified_by == READ_BACK
    assert summaries[1]["missing"] == 50 and summaries[1]["holes"] == [[250, 300]]
    assert summaries[0]["missing"] == 0


@pytest.mark.spark
def test_it_catches_a_record_replayed_twice_as_a_retried_task_would(spark, broker, topics):
    sink = sink_of(spark, broker, topics)
    sink.write(records(spark, topics[0]))
    # The same attempt's record sent once more: what a task that failed after sending it and ran again leaves.
    sink_of(spark, broker, topics).write(records(spark, topics[0]).where("partition = 0 and offset = 42"))

    summaries = by_partition(sink.summarize(ranges(topics)))

    assert sink.verified_by == READ_BACK
    assert summaries[0]["duplicates"] == 1 and summaries[0]["missing"] == 0
    assert summaries[1]["duplicates"] == 0


@pytest.mark.spark
def test_it_catches_a_lost_record_whose_place_another_writer_took(spark, broker, topics):
    sink = sink_of(spark, broker, topics)
    sink.write(records(spark, topics[0]).where("not (partition = 0 and offset = 157)"))
    broker.produce(topics[1], 0, 1, prefix="other")  # partition 0 now ends where a complete replay would

    summaries = by_partition(sink.summarize(ranges(topics)))

    assert sink.verified_by == READ_BACK
    assert summaries[0]["missing"] == 1 and summaries[0]["holes"] == [[157, 158]]


@pytest.mark.spark
def test_it_reads_back_a_replay_whose_counts_hold_once_the_source_lost_the_start_of_a_range(spark, broker, topics):
    sink = sink_of(spark, broker, topics)
    # Retention took offset 0 of partition 0 while the job read (the read skips it), and a retried task
    # sent offset 42 twice: partition 0 ends where a complete replay would, its last record ours.
    sink.write(records(spark, topics[0]).where("not (partition = 0 and offset = 0)"))
    sink_of(spark, broker, topics).write(records(spark, topics[0]).where("partition = 0 and offset = 42"))
    [deleted] = broker.admin.delete_records([TopicPartition(topics[0], 0, 1)], operation_timeout=30).values()
    assert deleted.result(timeout=30).low_watermark == 1

    summaries = by_partition(sink.summarize(ranges(topics)))

    assert sink.verified_by == READ_BACK
    assert summaries[0]["holes"] == [[0, 1]] and summaries[0]["duplicates"] == 1
    assert (summaries[1]["missing"], summaries[1]["duplicates"]) == (0, 0)
