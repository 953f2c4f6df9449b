"""Every kind of group Kafka 4.3 has (issue 25): a streams group (KIP-1071)
run by Kafka's own ``WordCountDemo`` is listed with its type, members and
commits, as Kafka's ``kafka-streams-groups`` lists it; a consumer group named
like a Kafka Connect sink (``connect-<name>``) gets its new partition's
finding covered for Connect's default ``earliest``, said in words."""

from __future__ import annotations

import io

import pytest
from confluent_kafka import Consumer, TopicPartition
from django.core.management import CommandError, call_command

from groups.models import Cluster, ConsumerGroup, Finding, RemediationJob
from tasks.celery_tasks import run_remediation_job
from adapters.kafka.java_admin import JavaAdmin
from tests.harness.kafka_clients import KafkaStreamsWordCount, kafka_tool, wait_until
from tests.harness.scenarios import poll, produce_one_each, start_consuming_group


@pytest.mark.django_db(transaction=True)
def test_a_streams_group_is_listed_with_its_members_and_commits_and_its_reset_waits_for_the_application(
        broker, kafka_bootstrap, unique, tmp_path):
    cluster = Cluster.objects.create(name=f"streams-{unique}", bootstrap_servers=kafka_bootstrap)
    topic, application = KafkaStreamsWordCount.INPUT, f"wordcount-{unique}"
    word_count_topics(broker)
    app = KafkaStreamsWordCount(kafka_bootstrap, application, str(tmp_path))
    reset = ("reset_offsets", "--cluster", cluster.name, "--group", application, "--topic", f"{topic}:0",
             "--to-earliest", "--execute")
    try:
        def listed():
            broker.produce(topic, 0, 1, prefix="a b")
            broker.produce(topic, 1, 1, prefix="c d")
            poll(cluster)
            group = ConsumerGroup.objects.filter(cluster=cluster, group_id=application).first()
            reading = group is not None and group.group_topics.filter(topic__name=topic).exists()
            return reading and any(member["assignment"] for member in group.members) and group

        group = wait_until(listed, timeout=90, interval=1, what="a poll to list the streams group reading its input")
        assert (group.type, group.assignor) == ("streams", "streams")
        assigned = {tuple(pair) for member in group.members for pair in member["assignment"]}
        assert {(topic, 0), (topic, 1)} <= assigned
        theirs = kafka_tool("org.apache.kafka.tools.streams.StreamsGroupCommand", "--bootstrap-server",
                            kafka_bootstrap, "--list")
        assert application in theirs.split()

        # The reset's plan is taken now, and a job fails if a commit moved since its plan: first let the
        # application commit all it read of partition 0 (a full run planned "no commit", then it committed 5).
        ends = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"{application}-watermarks"})
        try:
            with JavaAdmin(cluster.cluster_config()) as admin:
                wait_until(lambda: committed_through_end(ends, admin, application, topic),
                           what="the application to commit partition 0 up to its end")
        finally:
            ends.close()
        # A reset waits while the application runs: confluent-kafka would call the group Dead and empty.
        with pytest.raises(CommandError, match=f"is waiting: group {application} has 1 active member"):
            call_command(*reset, stdout=io.StringIO())
    finally:
        app.close()
    job = RemediationJob.objects.get(group=group)
    with JavaAdmin(cluster.cluster_config()) as reader:
        wait_until(lambda: reader.streams_group_states([application])[application] == ("Empty", 0),
                   what="the streams group to be Empty")
        before = reader.read_streams([application])[0].committed.get((topic, 0))
        status = run_remediation_job.apply(args=(job.id,)).get()
        job.refresh_from_db()
        assert status == "succeeded", (job.status_reason, job.error)
        assert job.result["partitions"] == [
            {"topic": topic, "partition": 0, "before": before, "planned": 0, "after": 0}]
        (read,) = reader.read_streams([application])
        assert read.committed[(topic, 0)] == 0
    # The poll reads a streams group's commits as its positions (the reset's commit at 0 here: the
    # demo application itself first commits about a minute after it starts).
    poll(cluster)
    assert committed(ConsumerGroup.objects.get(id=group.id))[(topic, 0)] == 0


def word_count_topics(broker) -> None:
    """The demo's input (two partitions) and output topics, where missing
    (the brokers create no topic on first use). Without its output the
    demo's first count fails to send within a minute and the client shuts
    down; under exactly-once that send is in the transaction that carries the
    input's commits, so none is ever committed."""
    existing = broker.admin.list_topics(timeout=10).topics
    for name, partitions in ((KafkaStreamsWordCount.INPUT, 2), (KafkaStreamsWordCount.OUTPUT, 1)):
        if name not in existing:
            broker.create_topic(name, partitions)


def committed(group: ConsumerGroup) -> dict[tuple[str, int], int]:
    """The group's commits as the last poll stored them."""
    return {(link.topic.name, row["partition"]): row["committed"]
            for link in group.group_topics.select_related("topic") for row in link.partitions
            if row.get("committed") is not None}


@pytest.mark.django_db(transaction=True)
def test_a_connect_sinks_group_is_covered_for_connects_default_earliest(broker, unique, client, viewer):
    cluster = Cluster.objects.create(name=f"connect-{unique}", bootstrap_servers=broker.bootstrap)
    topic, group_id = f"connect-sink-{unique}", f"connect-s3-sink-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="earliest", refresh_ms=2000)
    try:
        # The sink takes the new partition before any poll sees it unowned: no end before pickup is
        # known, so no commit can prove where it started; only the policy can decide.
        broker.raise_partitions(topic, 3)
        wait_until(lambda: produce_one_each(broker, topic, [2]) and consumer.count(2) > 0, interval=0.5,
                   what="the sink's consumer to read the new partition")

        def decided():
            poll(cluster)
            finding = Finding.objects.filter(group__group_id=group_id, topic__name=topic, partition=2).first()
            return finding is not None and finding.state not in ("pending", "undecided") and finding

        finding = wait_until(decided, timeout=60, interval=0.5, what="the Connect sink's finding to be decided")
    finally:
        consumer.close()
    assert finding.pre_pickup_high_watermark is None
    assert (finding.state, finding.policy_source) == (Finding.State.COVERED, "assumed"), finding.explanation
    assert "assumed earliest, Kafka Connect's default for a sink connector's group" in finding.explanation
    assert (finding.missed_definite, finding.missed_possible, finding.backfill_start) == (0, 0, None)
    # Its page names the assumption: earliest, not the clients' latest.
    client.force_login(viewer)
    page = client.get(f"/findings/{finding.id}/").content.decode()
    assert "earliest, its framework's default, is assumed" in page, page


@pytest.mark.django_db(transaction=True)
def test_an_exactly_once_streams_application_is_a_streams_group_with_its_transactional_commits(
        broker, kafka_bootstrap, unique, tmp_path):
    """Issue 32: Kafka Streams with exactly_once_v2 commits its input
    positions inside its transactions (visible once each one commits) and
    reads read_committed. Gapwatch lists it as a streams group with those
    commits as its positions. (Observed while writing this, not asserted: the
    demo, Streams 4.3.1 on a 4.4.0 broker, took no partition added to its
    input within two minutes; Gapwatch showed it pending, then unowned.)"""
    cluster = Cluster.objects.create(name=f"streams-eos-{unique}", bootstrap_servers=kafka_bootstrap)
    topic, application = KafkaStreamsWordCount.INPUT, f"wordcount-eos-{unique}"
    word_count_topics(broker)
    app = KafkaStreamsWordCount(kafka_bootstrap, application, str(tmp_path), exactly_once=True)
    try:
        def reading():
            for partition in (0, 1):
                broker.produce(topic, partition, 1, prefix="e f")
            poll(cluster)
            group = ConsumerGroup.objects.filter(cluster=cluster, group_id=application).first()
            positions = committed(group) if group is not None else {}
            return {(topic, 0), (topic, 1)} <= set(positions) and (group, positions)

        try:
            group, positions = wait_until(reading, timeout=120, interval=1,
                                          what="the exactly-once application to commit its input")
        except AssertionError as waited:
            raise AssertionError(f"{waited}; {app.log_tail()}") from None
    finally:
        app.close()
    assert (group.type, group.assignor) == ("streams", "streams")
    assert all(positions[(topic, p)] > 0 for p in (0, 1)), positions


def committed_through_end(ends: Consumer, admin: JavaAdmin, application: str, topic: str) -> bool:
    """Whether the streams group's commit on ``topic`` partition 0 is its high
    watermark (``ends``: a consumer for watermarks only, ``admin``: the cluster's)."""
    _, end = ends.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    (group,) = admin.read_streams([application])
    return group.committed.get((topic, 0)) == end
