"""Share groups (KIP-932) found and counted by the real poll and watcher, on
the real broker, with clients we did not write: Kafka's own
``ConsoleShareConsumer`` and librdkafka's share consumer (confluent-kafka
``ShareConsumer``) pick a new partition up on their own metadata refresh
while they consume (issue 25).

The truth is what the consumer printed: the first offset it delivered on the
new partition. The finding's bounds must hold it: the high watermark an
observation saw before the group initialised the partition below it, the
first start offset seen above it (start offsets only move forward).

Share groups lose records on a new partition up to Kafka 4.3: the loss is
shown on a 4.3.1 broker of the session's own (``kafka_4_3``), a release
people run. From 4.4.0 (the local broker) a share group left at the default
starts a partition added to a topic it already read at offset 0
(KAFKA-20742), and Gapwatch shows it covered."""

from __future__ import annotations

import pytest

from groups.models import Cluster, ConsumerGroup, Finding
from tasks.celery_tasks import watch_cluster_task
from groups.web.links import group_url
from tests.harness.kafka_clients import (
    Broker,
    JavaConsoleShareConsumer,
    ShareGroupConsumer,
    kafka_tool,
    wait_until,
)
from tests.harness.scenarios import poll

# The share consumer's metadata refresh: how long a new partition waits for it.
REFRESH_MS = 5000
EARLY = 40


def _reading(cluster: Cluster, group_id: str, topic: str) -> bool:
    poll(cluster)
    return ConsumerGroup.objects.filter(cluster=cluster, group_id=group_id, type="share",
                                        group_topics__topic__name=topic).exists()


def _raise_and_watch(broker, cluster, topic: str, group_id: str) -> Finding:
    """Partition 1 added while the group consumes, EARLY records written to it
    at once and one more per watcher tick, until the finding is decided."""
    broker.raise_partitions(topic, 2)
    broker.produce(topic, 1, EARLY)

    def decided():
        watch_cluster_task(cluster.id)
        broker.produce(topic, 1, 1, prefix="tick")
        finding = Finding.objects.filter(group__group_id=group_id, topic__name=topic, partition=1).first()
        return finding is not None and finding.state not in ("pending", "undecided") and finding

    return wait_until(decided, timeout=6 * REFRESH_MS / 1000, interval=0, what="the share group's finding")


CLIENTS = {"java": JavaConsoleShareConsumer, "rdkafka": ShareGroupConsumer}


@pytest.fixture
def broker_4_3(kafka_4_3):
    """The 4.3.1 broker; topics a test creates through it are deleted after it."""
    broker = Broker(kafka_4_3.bootstrap)
    yield broker
    broker.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(CLIENTS))
def test_a_share_group_that_started_a_new_partition_at_the_end_has_a_gap_whose_bounds_hold_the_truth(
        broker_4_3, share_consumers, unique, client, viewer, kind):
    broker, kafka_bootstrap = broker_4_3, broker_4_3.bootstrap
    topic, group_id = f"share-find-{kind}-{unique}", f"share-find-{kind}-{unique}"
    cluster = Cluster.objects.create(name=f"share-{unique}", bootstrap_servers=kafka_bootstrap)
    broker.create_topic(topic, 1)
    consumer = CLIENTS[kind](kafka_bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    share_consumers.append(consumer)
    wait_until(lambda: broker.produce(topic, 0, 1) or consumer.count(0) > 0,
               what="the share consumer to read partition 0")
    wait_until(lambda: _reading(cluster, group_id, topic), what="a poll to store the share group reading the topic")

    finding = _raise_and_watch(broker, cluster, topic, group_id)

    assert finding.group.type == "share"
    assert finding.state == Finding.State.GAP, finding.explanation
    assert "share.auto.offset.reset=latest (the broker's default)" in finding.explanation
    assert "first start offset" in finding.explanation
    # The bounds hold the first offset the consumer delivered on the new partition.
    wait_until(lambda: consumer.count(1) > 0, what="the share consumer to read partition 1")
    truth = min(consumer.offsets(1))
    lower, upper = finding.pre_pickup_high_watermark, finding.first_commit
    assert lower is not None and lower >= EARLY and lower <= truth <= upper, (lower, truth, upper)
    assert (finding.missed_definite, finding.missed_possible) == (lower, upper - lower)
    assert (finding.backfill_start, finding.backfill_end) == (0, upper)
    # Kafka's own tool says nothing is lagging on it.
    described = kafka_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                           "--bootstrap-server", kafka_bootstrap, "--describe", "--group", group_id)
    lines = [line.split() for line in described.splitlines() if line.strip()]
    header = next(line for line in lines if "LAG" in line)
    row = next(dict(zip(header, line, strict=False)) for line in lines if line[:3] == [group_id, topic, "1"])
    assert row["LAG"] == "0", described
    # The finding's page names the kind and speaks of start offsets, not commits.
    client.force_login(viewer)
    page = client.get(f"/findings/{finding.id}/").content.decode()
    assert "share (KIP-932)" in page and "First start offset" in page and "First commit" not in page
    assert f"{finding.missed_definite} definitely missed" in page
    group_page = client.get(group_url(finding.group)).content.decode()
    assert "share.auto.offset.reset=latest (the broker&#x27;s default)" in group_page, group_page
    assert "Start offset" in group_page
    (listed,) = client.get("/api/v1/groups", {"group": group_id}).json()["results"]
    assert (listed["group_type"], listed["reset_setting"]) == (
        "share", "share.auto.offset.reset=latest (the broker's default)")


@pytest.mark.django_db(transaction=True)
def test_a_share_group_set_to_earliest_is_covered_and_says_why(broker, kafka_bootstrap, share_consumers, unique):
    topic, group_id = f"share-early-find-{unique}", f"share-early-find-{unique}"
    cluster = Cluster.objects.create(name=f"share-early-{unique}", bootstrap_servers=kafka_bootstrap)
    broker.create_topic(topic, 1)
    kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", kafka_bootstrap, "--alter",
               "--entity-type", "groups", "--entity-name", group_id, "--add-config", "share.auto.offset.reset=earliest")
    consumer = JavaConsoleShareConsumer(kafka_bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    share_consumers.append(consumer)
    wait_until(lambda: broker.produce(topic, 0, 1) or consumer.count(0) > 0,
               what="the share consumer to read partition 0")
    wait_until(lambda: _reading(cluster, group_id, topic), what="a poll to store the share group reading the topic")

    finding = _raise_and_watch(broker, cluster, topic, group_id)

    assert finding.state == Finding.State.COVERED, finding.explanation
    assert finding.policy_source in ("declared", "evidenced")
    assert (finding.missed_definite, finding.missed_possible, finding.backfill_start) == (0, 0, None)
    wait_until(lambda: consumer.count(1) >= EARLY, what="the earliest share group to read the early records")
    assert min(consumer.offsets(1)) == 0


@pytest.mark.django_db(transaction=True)
def test_on_kafka_4_4_a_share_group_left_at_the_default_reads_a_new_partition_from_0_and_is_covered(
        broker, kafka_bootstrap, share_consumers, unique):
    """KAFKA-20742 (4.4.0): the broker starts a partition added to a topic the
    group already reads at offset 0, whatever share.auto.offset.reset says; the
    start offset below the high watermark the observation saw proves it."""
    topic, group_id = f"share-44-find-{unique}", f"share-44-find-{unique}"
    cluster = Cluster.objects.create(name=f"share-44-{unique}", bootstrap_servers=kafka_bootstrap)
    broker.create_topic(topic, 1)
    consumer = JavaConsoleShareConsumer(kafka_bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    share_consumers.append(consumer)
    wait_until(lambda: broker.produce(topic, 0, 1) or consumer.count(0) > 0,
               what="the share consumer to read partition 0")
    wait_until(lambda: _reading(cluster, group_id, topic), what="a poll to store the share group reading the topic")

    finding = _raise_and_watch(broker, cluster, topic, group_id)

    assert finding.state == Finding.State.COVERED, finding.explanation
    assert (finding.missed_definite, finding.missed_possible, finding.backfill_start) == (0, 0, None)
    wait_until(lambda: consumer.count(1) >= EARLY, what="the share group to read the early records")
    assert min(consumer.offsets(1)) == 0
