"""Repairs of a share group's finding (KIP-932) on the real broker, against
clients and tools we did not write: Kafka's ``ConsoleShareConsumer`` in the
group and ``kafka-share-groups --describe`` (``ShareGroupCommand``) beside it.

The scenario: a share group (``share.auto.offset.reset`` left at its default,
``latest``) reads partition 0 of a topic; the topic grows a partition 1 and K
records are written to it before the group first fetches from it, so the
group starts partition 1 past them and never delivers them. The rows the poll
would store are written here (a ``ConsumerGroup`` of type "share", a gap
finding whose ``committed_offset`` is the group's start offset); the repair is
approved through the service the approve page calls and run by the real task.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicCollection, TopicPartition

from groups.models import AuditEvent, ConsumerGroup, Finding, PartitionGeneration, RemediationJob, Topic
from groups.services.previews import job_preview
from groups.services.remediation import job_request_previewed
from tasks.celery_tasks import run_remediation_job
from adapters.kafka.errors import GroupNotEmpty
from adapters.kafka.java_admin import JavaAdmin
from tests.harness.backfills import parquet_rows, run_job
from tests.harness.kafka_clients import JavaConsoleShareConsumer, share_groups_describe, steady, wait_until
from tests.harness.scenarios import job_of

K = 20  # records written to the new partition before the group first fetched from it
# The share consumer's metadata refresh: how soon it fetches from a new partition.
REFRESH_MS = 2000


def high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "gapwatch-test-watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


@dataclass
class LostStart:
    """A share group that started new partition 1 past its first K records.
    ``first_start``: the group's start offset on partition 1 when it was first
    seen (the bound of what it never delivered); ``end``: the partition's
    high watermark, every record below it delivered; ``start``: the group's
    start offset once it rests there. The broker stores a start offset
    lazily: with everything delivered and acknowledged (LAG 0) it may still
    show the offset of the last batch (a run here saw 62 with the end
    at 63), so ``start`` is read, not assumed to be ``end``."""

    topic: str
    group_id: str
    consumer: JavaConsoleShareConsumer
    first_start: int
    end: int
    start: int

    @classmethod
    def create(cls, broker, reader: JavaAdmin, consumers: list, topic: str, group_id: str) -> LostStart:
        broker.create_topic(topic, 1)
        consumer = JavaConsoleShareConsumer(broker.bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
        consumers.append(consumer)
        # `latest`: a record a tick until the member reads from partition 0.
        wait_until(lambda: broker.produce(topic, 0, 1, prefix="tick") or consumer.count(0), interval=0.5,
                   what="the share consumer to read partition 0")
        broker.raise_partitions(topic, 2)
        broker.produce(topic, 1, K)

        def start_of_1() -> int | None:
            return reader.start_offsets_of(group_id=group_id, partitions=[(topic, 1)])[(topic, 1)]

        # The broker shows a partition's start only once the group has fetched from it: a record a tick until then.
        first_start = wait_until(lambda: broker.produce(topic, 1, 1, prefix="tick") or start_of_1(),
                                 timeout=4 * REFRESH_MS / 1000 + 30, what="the share group to initialise partition 1")
        assert first_start >= K, f"the group started partition 1 at {first_start}, before the {K} written first"
        end = high_watermark(broker.bootstrap, topic, 1)
        wait_until(lambda: end - 1 in consumer.offsets(1), what="the share consumer to read partition 1 to its end")

        start = wait_until(steady(start_of_1, seconds=0.5), interval=0.1,
                           what="the share group's start offset on partition 1 to rest")[0]
        return cls(topic=topic, group_id=group_id, consumer=consumer, first_start=first_start, end=end, start=start)

    def stop(self, reader: JavaAdmin) -> None:
        self.consumer.close()
        wait_until(lambda: reader.describe([self.group_id])[self.group_id].state == "Empty",
                   what=f"share group {self.group_id} to be Empty")

    def finding(self, broker, reader: JavaAdmin, cluster) -> Finding:
        """The rows a poll would store: the topic's two generations, the share
        group as described now, and a gap finding on partition 1 whose
        committed offset is the group's start offset and whose sound range is
        [0, first start)."""
        now = datetime.now(UTC)
        described = reader.describe([self.group_id])[self.group_id]
        topic_id = str(broker.admin.describe_topics(TopicCollection([self.topic]))[self.topic].result().topic_id)
        topic_row = Topic.objects.create(cluster=cluster, name=self.topic, kafka_topic_id=topic_id, partition_count=2,
                                         first_seen_at=now, updated_at=now)
        PartitionGeneration.objects.create(topic=topic_row, number=1, kafka_topic_id=topic_id, partitions=[0],
                                           observed_at=now)
        generation = PartitionGeneration.objects.create(topic=topic_row, number=2, kafka_topic_id=topic_id,
                                                        partitions=[0, 1], added_partitions=[1], observed_at=now)
        group = ConsumerGroup.objects.create(cluster=cluster, group_id=self.group_id, type="share",
                                             state=described.state, member_count=len(described.members),
                                             first_seen_at=now, last_seen_at=now)
        return Finding.objects.create(
            cluster=cluster, group=group, topic=topic_row, partition=1, generation=generation,
            state=Finding.State.GAP, created_at=now, updated_at=now, first_log_start=0, log_start_offset=0,
            high_watermark=self.end, committed_offset=self.start, lag=self.end - self.start,
            pre_pickup_high_watermark=K, first_commit=self.first_start, missed_definite=K,
            missed_possible=self.first_start - K, backfill_start=0, backfill_end=self.first_start,
            policy_source="assumed",
        )


def approve_reset_to_earliest(user, finding: Finding) -> RemediationJob:
    """What the approve page does: preview the job, then request it as previewed (approved at once)."""
    preview = job_preview(finding_ids=[finding.id], kind="reset", params={"target": "earliest"})
    return job_request_previewed(user=user, kind="reset", preview=preview)


def assert_delivers_partition_1_from_0(broker, lost: LostStart, consumers: list) -> None:
    """The group started again delivers partition 1 from offset 0, the K it
    never delivered first, and nothing again of partition 0. A marker is then
    written to each partition: a partition delivers in order, so once both
    are in, anything else the group would deliver is in too."""
    consumer = JavaConsoleShareConsumer(broker.bootstrap, lost.group_id, lost.topic, refresh_ms=REFRESH_MS)
    consumers.append(consumer)
    wait_until(lambda: consumer.count(1) >= lost.end, what="the share group to deliver partition 1 again")
    end_0 = high_watermark(broker.bootstrap, lost.topic, 0)
    for partition in (0, 1):
        broker.produce(lost.topic, partition, 1, prefix="marker")
    wait_until(lambda: consumer.count(0) >= 1 and consumer.count(1) > lost.end, what="the markers to arrive")
    assert min(consumer.offsets(1)) == 0
    assert sorted(set(consumer.offsets(1))) == list(range(lost.end + 1)), "from 0 to the end, then the marker"
    assert set(consumer.offsets(0)) == {end_0}, "only the marker of the partition it had read"


# -- the reset ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_resets_a_stopped_share_group_to_earliest_and_the_group_delivers_what_it_missed(
    share_broker, share_cluster, unique, approver, celery_worker_thread, share_reader, share_consumers, share_bootstrap
):
    lost = LostStart.create(share_broker, share_reader, share_consumers, f"share-reset-{unique}",
                            f"share-reset-{unique}")
    lost.stop(share_reader)
    start_0 = share_groups_describe(share_bootstrap, lost.group_id)[(lost.topic, 0)][0]
    finding = lost.finding(share_broker, share_reader, share_cluster)

    job = approve_reset_to_earliest(approver, finding)
    [planned] = job.plan  # planned from the stored start offset, before anything is set
    assert {key: planned[key] for key in ("partition", "log_start", "high_watermark", "current", "planned")} == {
        "partition": 1, "log_start": 0, "high_watermark": lost.end, "current": lost.start, "planned": 0}
    wait_until(lambda: job_of(job.id).status in RemediationJob.FINISHED, timeout=60, interval=0.1,
               what="the worker to run the job")

    job = job_of(job.id)
    assert job.status == "succeeded", (job.status_reason, job.error)
    assert job.result["partitions"] == [
        {"topic": lost.topic, "partition": 1, "before": lost.start, "planned": 0, "after": 0}]
    assert job.result["verified"] is True and job.result["group_state"] == "Empty"
    audit = AuditEvent.objects.get(action="offsets.reset", object_id=str(job.id))
    assert audit.detail["partitions"] == job.result["partitions"] and audit.detail["verified"] is True
    finding.refresh_from_db()
    assert finding.resolution == Finding.Resolution.REPAIRED and finding.resolved_by_job_id == job.id

    # Kafka's own tool: partition 1 starts at 0, every record of it to deliver again; partition 0 untouched.
    described = share_groups_describe(share_bootstrap, lost.group_id)
    assert described[(lost.topic, 1)] == (0, lost.end)
    assert described[(lost.topic, 0)][0] == start_0

    assert_delivers_partition_1_from_0(share_broker, lost, share_consumers)


@pytest.mark.django_db(transaction=True)
def test_a_share_group_reset_waits_while_the_group_has_a_member_and_succeeds_once_it_left(
    share_broker, share_cluster, unique, approver, enqueued, share_reader, share_consumers, share_bootstrap
):
    lost = LostStart.create(share_broker, share_reader, share_consumers, f"share-busy-{unique}", f"share-busy-{unique}")
    finding = lost.finding(share_broker, share_reader, share_cluster)
    job = approve_reset_to_earliest(approver, finding)
    assert enqueued == [job.id]

    assert run_remediation_job.apply(args=(job.id,)).get() == "waiting"
    waiting = job_of(job.id)
    assert waiting.status_reason == (
        f"group {lost.group_id} has 1 active member; stop its consumers or choose a Spark backfill")
    assert share_reader.start_offsets_of(group_id=lost.group_id, partitions=[(lost.topic, 1)]) == {
        (lost.topic, 1): lost.start}
    assert not AuditEvent.objects.filter(action="offsets.reset").exists()
    # Had it been tried anyway, the broker refuses it while the member is there.
    with pytest.raises(GroupNotEmpty, match="GroupNotEmptyException"):
        share_reader.alter_start_offsets(group_id=lost.group_id, offsets={(lost.topic, 1): 0})

    lost.stop(share_reader)
    assert run_remediation_job.apply(args=(job.id,)).get() == "succeeded"
    job = job_of(job.id)
    assert job.result["verified"] is True and job.result["waiting_since"] and job.result["checks"] == 1
    assert job.result["partitions"] == [
        {"topic": lost.topic, "partition": 1, "before": lost.start, "planned": 0, "after": 0}]
    assert share_groups_describe(share_bootstrap, lost.group_id)[(lost.topic, 1)] == (0, lost.end)


# -- the backfill -----------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_backfill_of_a_share_group_finding_delivers_exactly_its_range(
    share_broker, share_cluster, unique, approver, enqueued, backfill_on_server, share_reader, share_consumers
):
    """Nothing in a backfill is share-specific: it reads the finding's
    ``[backfill_start, backfill_end)`` from the topic, whoever the group is.
    This shows it on a range a real share group lost."""
    lost = LostStart.create(share_broker, share_reader, share_consumers, f"share-bf-{unique}", f"share-bf-{unique}")
    lost.stop(share_reader)
    finding = lost.finding(share_broker, share_reader, share_cluster)
    preview = job_preview(finding_ids=[finding.id], kind="backfill", params={"sink": "parquet"})
    job = run_job(job_request_previewed(user=approver, kind="backfill", preview=preview).id)

    assert job.status == "succeeded", (job.status_reason, job.error)
    rows = parquet_rows(str(Path(backfill_on_server.BACKFILL_OUTPUT) / str(job.id)))
    assert [(topic, partition, offset) for topic, partition, offset, *_ in rows] == [
        (lost.topic, 1, offset) for offset in range(lost.first_start)]
    assert [(key, value) for *_, key, value, _ in rows[:K]] == [
        (f"m-1-{n}".encode(), f"m-{n}".encode()) for n in range(K)]
    finding.refresh_from_db()
    assert finding.resolution == Finding.Resolution.REPAIRED
