"""Real clients pick a new partition up on their own metadata refresh while
the watcher runs: Gapwatch's definite/possible must bracket what the client
never consumed (issue 11). The clients are Kafka's own Java console consumer
(KIP-848 protocol) and librdkafka (confluent-kafka) in both protocols; none
is restarted, each refreshes metadata every 5 s."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from groups.models import Finding
from tasks.jobs import watch_cluster_task
from tasks.polling import poll_cluster
from tests.integration.kafka_harness import (
    GroupConsumer,
    JavaConsoleConsumer,
    RateProducer,
    Ticker,
    never_consumed,
    wait_until,
)

RATE = 50  # messages a second to every partition


def watch(cluster_id: int) -> None:
    try:
        watch_cluster_task(cluster_id)
    finally:
        connection.close()  # the ticker's thread has its own connection


def pickup_trial(broker, cluster, topic: str, group_id: str, start_client) -> tuple[int, Finding]:
    """1. A latest group reads partition 0 of ``topic`` under steady production,
       and a poll sees it reading the topic.
    2. Partition 1 is added; the producer writes to it as soon as its own
       metadata shows it; the watcher ticks every second.
    3. The client takes partition 1 on its own refresh. Once Gapwatch decided
       the finding and the client read to the end, return the truth (offsets
       of partition 1 it never received) and the finding."""
    broker.create_topic(topic, 1)
    producer = RateProducer(broker.bootstrap, topic, rate=RATE, partitions=[0])
    client = start_client()
    ticker = None
    try:
        wait_until(lambda: client.count(0) > 0, timeout=90, what=f"{group_id} to read partition 0")
        wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and cluster.groups.filter(
            group_id=group_id, group_topics__topic__name=topic).exists(), interval=0.5,
            what=f"a poll to see {group_id} reading {topic}")
        ticker = Ticker(lambda: watch(cluster.id), interval=1.0)
        broker.raise_partitions(topic, 2)
        producer.add([1])

        def decided() -> Finding | None:
            row = Finding.objects.filter(topic__name=topic, group__group_id=group_id, partition=1).first()
            return row if row is not None and row.state not in ("pending", "undecided") and row.likely_start is not None else None

        wait_until(decided, timeout=90, interval=0.5, what=f"{group_id}'s finding to be decided")
        producer.stop()
        poll_cluster(cluster_id=cluster.id)
        row = Finding.objects.get(topic__name=topic, group__group_id=group_id, partition=1)
        wait_until(lambda: client.count(1) and max(client.offsets(1)) == row.high_watermark - 1, timeout=60,
                   what=f"{group_id} to read partition 1 to its end")
        return never_consumed(client.offsets(1), log_start=0, end=row.high_watermark), decided()
    finally:
        if ticker is not None:
            ticker.close()
        producer.stop()
        client.close()


def assert_brackets(truth: int, finding: Finding) -> None:
    definite, possible = finding.missed_definite, finding.missed_possible
    assert finding.state == "gap", finding.explanation
    assert definite <= truth <= definite + possible, (truth, definite, possible, finding.explanation)
    assert (finding.backfill_start, finding.backfill_end) == (0, definite + possible)
    evidence = finding.likely_start_evidence
    assert evidence.startswith("time index (CreateTime)") or "log end" in evidence
    # The time index gives an estimate only, inside what the broker proved.
    assert definite <= finding.likely_start <= definite + possible, finding.explanation


@pytest.mark.django_db(transaction=True)
def test_it_brackets_what_a_kip848_java_console_consumer_missed(broker, cluster, unique):
    topic, group_id = f"pickup-java-{unique}", f"java848-{unique}"
    truth, finding = pickup_trial(broker, cluster, topic, group_id, lambda: JavaConsoleConsumer(
        broker.bootstrap, group_id, topic, protocol="consumer", refresh_ms=5000))
    assert_brackets(truth, finding)
    assert finding.missed_definite > 0, "the watcher saw the partition unowned before the group took it"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_it_brackets_what_a_librdkafka_consumer_missed(broker, cluster, unique, protocol):
    topic, group_id = f"pickup-rdk-{unique}", f"rdk-{protocol}-{unique}"
    truth, finding = pickup_trial(broker, cluster, topic, group_id, lambda: GroupConsumer(
        broker.bootstrap, group_id, topic, offset_reset="latest", refresh_ms=5000, protocol=protocol,
        commit_interval_ms=1000))
    assert_brackets(truth, finding)


@pytest.mark.django_db(transaction=True)
def test_a_watcher_tick_observes_only_changed_topics_and_opens_the_findings(broker, cluster, unique):
    topic, group_id = f"watched-{unique}", f"reader-{unique}"
    broker.create_topic(topic, 1)
    broker.produce(topic, 0, 3)
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="earliest")
    try:
        wait_until(lambda: consumer.count(0) == 3, what="the group to read partition 0")
        wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and cluster.groups.filter(
            group_id=group_id, group_topics__topic__name=topic).exists(), interval=0.5, what="a poll to see it")
        assert watch_cluster_task(cluster.id)["observed"] == [], "nothing changed: one metadata request only"

        broker.raise_partitions(topic, 3)
        broker.produce(topic, 2, 4)
        tick = watch_cluster_task(cluster.id)
    finally:
        consumer.close()

    assert (tick["observed"], tick["changed"]) == ([topic], [topic])
    assert 1 <= len(tick["later"]) < settings.WATCH_OBSERVATIONS_PER_TICK, "observed again within its interval"
    assert all(observed == [topic] for observed in tick["later"])
    rows = {f.partition: f for f in Finding.objects.filter(topic__name=topic, group__group_id=group_id)}
    assert sorted(rows) == [1, 2]
    assert (rows[2].state, rows[2].pre_pickup_high_watermark, rows[2].first_log_start) == ("pending", 4, 0)
    assert rows[2].pickup_after is not None and rows[2].pickup_before is None
