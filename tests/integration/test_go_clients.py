"""The Go client that never takes a new partition (issue 32): segmentio/kafka-go
left at its default, without ``WatchPartitionChanges``. The Go clients that do
take new partitions by themselves (sarama, kafka-go with the watch, franz-go,
confluent-kafka-go) are pickup scenarios (tests/harness/pickups.py).

A ``latest`` kafka-go group without the watch keeps reading the partitions it
joined with; a partition added to its topic stays unread until the group
rebalances for another reason. Gapwatch must show it unowned with every
record written to it unread, and the repair the product offers for it, a
reset of the partition to the log start while the group is Empty, must make
the same client read exactly what it missed once it starts again."""

from __future__ import annotations


import pytest
from django.test import override_settings

from groups.models import Finding, RemediationJob
from groups.services.remediation import job_request
from tests.harness.kafka_clients import GoClientConsumer, wait_until
from tests.harness.scenarios import committed, findings, poll

K = 25  # records written to the new partition while the group does not read it
REFRESH_MS = 5000


@pytest.fixture
def go_clients():
    """Go clients a test starts: stopped after it, whatever happened."""
    started: list[GoClientConsumer] = []
    yield started
    for client in started:
        client.close()


def start_reading(broker, go_clients: list, client: str, topic: str, group_id: str) -> GoClientConsumer:
    """``client`` in ``group_id`` reading partition 0 of ``topic``: at latest it reads
    only what is written after it joined, so write until it has read something."""
    consumer = GoClientConsumer(client, broker.bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    go_clients.append(consumer)
    wait_until(lambda: broker.produce(topic, 0, 1) or consumer.count(0) > 0, timeout=90, interval=0.5,
               what=f"{client} in {group_id} to read partition 0")
    return consumer


def group_state(broker, group_id: str) -> str:
    return broker.admin.describe_consumer_groups([group_id])[group_id].result(timeout=30).state.name


@pytest.mark.django_db(transaction=True)
@override_settings(UNOWNED_AFTER_POLLS=3)
def test_it_shows_kafka_go_without_the_watch_leaving_a_new_partition_unowned_and_a_reset_repairs_it(
    broker, cluster, unique, group_ids, go_clients, approver, celery_worker_thread
):
    topic, group_id = f"go-nowatch-{unique}", f"go-nowatch-{unique}-g"
    # The control: the same client with WatchPartitionChanges, on a topic of its own.
    watched_topic, watched_group = f"go-watch-{unique}", f"go-watch-{unique}-g"
    group_ids.extend([group_id, watched_group])
    for name in (topic, watched_topic):
        broker.create_topic(name, 1)
    nowatch = start_reading(broker, go_clients, "kafka-go-nowatch", topic, group_id)
    watching = start_reading(broker, go_clients, "kafka-go", watched_topic, watched_group)
    wait_until(lambda: poll(cluster) and cluster.groups.filter(group_id=group_id, group_topics__topic__name=topic)
               .exists(), interval=0.5, what="a poll to see the group reading its topic")

    for name in (topic, watched_topic):
        broker.raise_partitions(name, 2)
        broker.produce(name, 1, K)

    # Unowned after UNOWNED_AFTER_POLLS polls with no owner, and by then the watching
    # client took its own new partition (at its end: it reads what is written after).
    def unowned_while_the_watching_client_reads() -> bool:
        broker.produce(watched_topic, 1, 1, prefix="after")
        poll(cluster)
        return findings(topic, group_id)[1].state == "unowned" and watching.count(1) > 0

    wait_until(unowned_while_the_watching_client_reads, timeout=90, interval=1,
               what="the finding unowned and the watching client reading partition 1")
    read = nowatch.count(0)
    broker.produce(topic, 0, 1, prefix="alive")
    wait_until(lambda: nowatch.count(0) > read, what="the client to go on reading partition 0")
    assert nowatch.count(1) == 0, "kafka-go without WatchPartitionChanges never takes the new partition"

    finding = findings(topic, group_id)[1]
    assert (finding.state, finding.committed_offset, finding.owner_client_id) == ("unowned", None, "")
    assert (finding.first_log_start, finding.high_watermark, finding.lag) == (0, K, K), "every record unread"
    assert f"{K} messages unread" in finding.explanation, finding.explanation

    # The repair: stop the client (the group is Empty), reset partition 1 to the log start.
    nowatch.close()
    assert nowatch.returncode == 0, "it leaves its group and exits cleanly on SIGTERM"
    before = committed(broker, group_id, topic, partitions=(0, 1))
    assert before[0] is not None and before[1] is None
    wait_until(lambda: group_state(broker, group_id) == "EMPTY", what="the group to be Empty")
    poll(cluster)
    job = job_request(user=approver, finding_ids=[finding.id], kind="reset", params={"target": "earliest"})
    [planned] = job.plan
    assert {key: planned[key] for key in ("partition", "log_start", "high_watermark", "current", "planned")} == {
        "partition": 1, "log_start": 0, "high_watermark": K, "current": None, "planned": 0
    }
    job = wait_until(lambda: (j := RemediationJob.objects.get(id=job.id)).status in RemediationJob.FINISHED and j,
                     timeout=60, interval=0.2, what="the worker to run the reset")
    assert (job.status, job.result["verified"]) == ("succeeded", True), job.error
    assert committed(broker, group_id, topic, partitions=(0, 1)) == {0: before[0], 1: 0}
    closed = Finding.objects.get(id=finding.id)
    assert closed.closed_at is not None and closed.resolution == "repaired", (closed.resolution, closed.closed_reason)

    # The same client started again reads the K records it missed, once each, and nothing of
    # partition 0 again: once a marker written to each partition after them is in, all is.
    again = GoClientConsumer("kafka-go-nowatch", broker.bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    go_clients.append(again)
    wait_until(lambda: again.count(1) >= K, timeout=90, what="the missed records to arrive")
    broker.produce(topic, 0, 1, prefix="marker")
    broker.produce(topic, 1, 1, prefix="marker")
    wait_until(lambda: again.count(0) > 0 and again.count(1) > K, what="the markers to arrive")
    assert again.offsets(1) == list(range(K + 1)), "the K missed, once each, then the marker"
    assert again.offsets(0) == [before[0]], "of partition 0 only the marker: nothing it had read"
