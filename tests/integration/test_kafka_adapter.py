"""Contract tests of the Kafka adapter against the real broker.

The broker is shared with other tests running at the same time: every topic
and group name carries a unique suffix, and assertions look only at our own
topics and groups, never at the cluster as a whole.
"""

from __future__ import annotations

import threading
import time
import traceback
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groups.domain.snapshot import GroupSnapshot, PartitionOffsets, Snapshot
from adapters.kafka.adapter import ClusterConfig, KafkaAdapter, KafkaUnavailable
from tests.harness.kafka_clients import wait_until

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def admin(kafka_bootstrap):
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def adapter(kafka_bootstrap):
    return KafkaAdapter(ClusterConfig(bootstrap_servers=kafka_bootstrap), timeout=10.0)


@pytest.fixture
def make_topic(admin, unique):
    """Creates topics named after the test's unique suffix; deletes them after."""
    created: list[str] = []

    def make(label: str, partitions: int) -> str:
        name = f"adapter-{label}-{unique}"
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(timeout=30)
        created.append(name)
        wait_until(lambda: name in admin.list_topics(timeout=10).topics, what=f"topic {name}")
        return name

    yield make
    if created:
        for future in admin.delete_topics(created, operation_timeout=30).values():
            future.result(timeout=60)


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in counts.items():
        for number in range(count):
            producer.produce(topic, value=f"m-{partition}-{number}".encode(), partition=partition)
    assert producer.flush(30) == 0


def consume(consumer: Consumer, count: int, *, timeout: float = 60.0) -> None:
    received = 0
    deadline = time.monotonic() + timeout
    while received < count:
        assert time.monotonic() < deadline, f"consumed {received} of {count} messages"
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            received += 1


def group_in(snapshot: Snapshot, group_id: str) -> GroupSnapshot | None:
    return next((group for group in snapshot.groups if group.group_id == group_id), None)


def test_it_reads_exact_watermarks_topic_id_and_stage_timings(adapter, admin, make_topic, kafka_bootstrap):
    topic = make_topic("watermarks", 3)
    produce(kafka_bootstrap, topic, {0: 3, 1: 5, 2: 7})

    snapshot = adapter.snapshot(cluster="local", now=NOW)

    assert (snapshot.cluster, snapshot.taken_at) == ("local", NOW)
    read = snapshot.topic(topic)
    assert read is not None
    assert read.partitions == (
        PartitionOffsets(partition=0, log_start=0, high_watermark=3, last_stable_offset=3),
        PartitionOffsets(partition=1, log_start=0, high_watermark=5, last_stable_offset=5),
        PartitionOffsets(partition=2, log_start=0, high_watermark=7, last_stable_offset=7),
    )
    assert read.partition_ids == frozenset({0, 1, 2})
    assert read.is_internal is False
    expected_id = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30).topic_id
    assert read.topic_id and read.topic_id == str(expected_id)
    assert snapshot.topic("__consumer_offsets").is_internal is True
    assert set(adapter.last_timings) == {"topics", "watermarks", "groups", "offsets", "share_groups", "streams_groups",
                                         "log_starts"}
    assert all(seconds >= 0 for seconds in adapter.last_timings.values())


def test_the_java_helper_counts_partitions_as_librdkafka_does_a_raise_included(adapter, admin, make_topic, kafka_bootstrap):
    """The watcher's partition counts through the Java helper (adapters/kafka/java,
    compiled by setup.sh) are librdkafka's, also right after partitions were added."""
    from confluent_kafka.admin import NewPartitions

    from adapters.kafka.java_admin import JavaAdmin

    topic = make_topic("counts", 2)
    with JavaAdmin(ClusterConfig(bootstrap_servers=kafka_bootstrap), timeout=10.0) as reader:
        assert reader.partition_counts() is not None, "the Java helper is installed and answers"
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=30)
    wait_until(lambda: adapter.partition_counts(java=False).get(topic) == 5, what="librdkafka to see 5 partitions")
    assert adapter.partition_counts(java=True)[topic] == 5
    internal = "__consumer_offsets"
    assert adapter.partition_counts(java=True)[internal] == adapter.partition_counts(java=False)[internal]


def test_the_java_helper_names_every_group_that_reads_a_topic_and_no_other(adapter, admin, make_topic,
                                                                          kafka_bootstrap):
    """The watcher's changing tick reads only the groups this names: a group
    with a commit on the topic and no member (a hostile id), a classic and a
    KIP-848 group whose members are assigned it without a commit; not a group
    that reads another topic."""
    from tests.harness.kafka_clients import GroupConsumer

    topic, other = make_topic("readers", 2), make_topic("not-read", 1)
    committed_only, elsewhere = f"<script>1:{topic}\n", f"elsewhere-{topic}"
    for group_id, partition in ((committed_only, TopicPartition(topic, 1, 0)),
                                (elsewhere, TopicPartition(other, 0, 0))):
        answer = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, [partition])])
        assert answer[group_id].result(timeout=30).topic_partitions[0].error is None
    members = [GroupConsumer(kafka_bootstrap, f"{protocol}-{topic}", topic, offset_reset="latest", protocol=protocol)
               for protocol in ("classic", "consumer")]
    try:
        for member in members:
            wait_until(lambda member=member: member.assigned == {0, 1}, what="a member to own the topic")
        readers = adapter.topic_readers({topic: 2})
        ours = {committed_only, elsewhere, *(f"{protocol}-{topic}" for protocol in ("classic", "consumer"))}
        assert readers & ours == {committed_only, f"classic-{topic}", f"consumer-{topic}"}
        assert adapter.topic_readers({topic: 2}, java=False) is None, "without the JVM: read every group"
    finally:
        for member in members:
            member.close()


def test_the_java_client_reads_groups_and_commits_as_librdkafka_does(adapter, admin, make_topic, kafka_bootstrap):
    """A poll's groups and commits through the Java helper (``GroupReads``) are
    librdkafka's, in a full and in a targeted snapshot: a classic and a KIP-848
    group with members and commits, a group with commits only (a hostile id),
    and a group the cluster does not know (left out by both)."""
    from adapters.kafka.java_admin import JavaAdmin
    from tests.harness.kafka_clients import GroupConsumer, group_committed

    topic, other = make_topic("group-reads", 2), make_topic("group-reads-other", 1)
    produce(kafka_bootstrap, topic, {0: 3, 1: 4})
    committed_only, unknown = f"<script>\n{topic}😀", f"never-{topic}"
    answer = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        committed_only, [TopicPartition(topic, 1, 2), TopicPartition(other, 0, 0)])])
    assert answer[committed_only].result(timeout=30).topic_partitions[0].error is None
    members = {protocol: GroupConsumer(kafka_bootstrap, f"{protocol}-{topic}", topic, offset_reset="earliest",
                                       protocol=protocol) for protocol in ("classic", "consumer")}
    ours = sorted({committed_only, unknown, *(f"{protocol}-{topic}" for protocol in members)})
    try:
        for member in members.values():
            wait_until(lambda member=member: member.count(0) == 3 and member.count(1) == 4, what="a group to read")
        wait_until(lambda: all(group_committed(admin, f"{protocol}-{topic}", topic, [0, 1]) == {0: 3, 1: 4}
                               for protocol in members), what="both groups to commit what they read")
        with JavaAdmin(ClusterConfig(bootstrap_servers=kafka_bootstrap), timeout=10.0) as reader:
            read = reader.read_groups(ours)
        assert read is not None and read.others == (), "the Java helper is installed and reads every group"
        assert {group.group_id for group in read.groups} == set(ours) - {unknown}
        for targeted in (None, {topic}):
            through_java, through_librdkafka = (
                adapter.snapshot(cluster="local", now=NOW, topics=targeted, groups=ours, java=java)
                for java in (True, False))
            assert through_java.groups == through_librdkafka.groups
        assert {group.group_id: group.committed for group in through_java.groups}[committed_only] == {(topic, 1): 2}
    finally:
        for member in members.values():
            member.close()


def test_it_sees_the_log_start_move_after_delete_records(adapter, admin, make_topic, kafka_bootstrap):
    topic = make_topic("deleterecords", 1)
    produce(kafka_bootstrap, topic, {0: 10})
    [future] = admin.delete_records([TopicPartition(topic, 0, 4)], operation_timeout=30).values()
    assert future.result(timeout=30).low_watermark == 4

    read = adapter.snapshot(cluster="local", now=NOW).topic(topic)

    assert read.partitions == (PartitionOffsets(partition=0, log_start=4, high_watermark=10, last_stable_offset=10),)


def test_it_reads_the_first_record_still_stored_a_topics_retention_and_its_partitions(
        adapter, admin, make_topic, kafka_bootstrap):
    """For a finding's urgency and the topic page: asked for offset 2 after records below 4 were
    deleted, the first record is offset 4 with its timestamp; an empty partition has none; the
    retention is the broker's default (7 days: the test broker sets none); each partition's
    replicas, offsets and, through DescribeLogDirs, its size on disk."""
    topic = make_topic("firstrecord", 2)
    before_ms = time.time() * 1000
    produce(kafka_bootstrap, topic, {0: 10})
    admin.delete_records([TopicPartition(topic, 0, 4)], operation_timeout=30)[TopicPartition(topic, 0, 4)].result(
        timeout=30)

    first = adapter.first_record(topic=topic, partition=0, start=2, deadline=time.monotonic() + 20)
    assert first.offset == 4 and first.timestamp_type == "CreateTime"
    assert before_ms - 60_000 <= first.timestamp_ms <= time.time() * 1000
    assert adapter.first_record(topic=topic, partition=1, start=0, deadline=time.monotonic() + 20) is None

    retention, timestamp_type = adapter.topic_retention(topic)
    assert (retention.retention_ms, retention.cleanup_policy, timestamp_type) == (604_800_000, "delete", "CreateTime")
    [zero, one] = adapter.topic_partitions(topic)
    assert (zero.partition, zero.log_start, zero.high_watermark, one.high_watermark) == (0, 4, 10, 0)
    assert zero.leader is not None and zero.replicas == zero.in_sync == (zero.leader,)
    assert dict(zero.sizes)[zero.leader] > 0 and dict(one.sizes)[one.leader] == 0


def test_it_reads_the_last_stable_offset_below_an_open_transaction_where_a_poll_observes(
        adapter, make_topic, kafka_bootstrap):
    """Issue 32: beside the high watermark, the last stable offset of the
    partitions whose log starts a poll reads by topic (a changed or watched
    topic); elsewhere it is not read (None), never guessed."""
    watched, other = make_topic("stable", 1), make_topic("unwatched", 1)
    produce(kafka_bootstrap, watched, {0: 2})
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{watched}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(watched, value=b"x", partition=0)
    producer.flush(30)
    try:
        snapshot = adapter.snapshot(cluster="local", now=NOW, log_starts_for={watched},
                                    known_counts={watched: 1, other: 1})
        assert snapshot.topic(watched).partitions == (
            PartitionOffsets(partition=0, log_start=0, high_watermark=7, last_stable_offset=2),)
        assert snapshot.topic(other).partitions[0].last_stable_offset is None
    finally:
        producer.commit_transaction(30)
    # The coordinator writes the commit marker after the commit returns: the LSO reaches the end soon after.
    wait_until(lambda: adapter.snapshot(cluster="local", now=NOW, topics={watched}).topic(watched).partitions[0] ==
               PartitionOffsets(partition=0, log_start=0, high_watermark=8, last_stable_offset=8),
               what="the last stable offset to reach the high watermark after the commit marker")


def test_it_keeps_polling_while_topics_are_created_and_deleted(adapter, admin, unique):
    # A topic created a moment ago answers NOT_LEADER, one being deleted
    # "No leaders found": neither may fail the poll of the whole cluster.
    # A deleted topic is left out, a living one is always complete.
    snapshots: list[Snapshot] = []
    errors: list[KafkaUnavailable] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                snapshots.append(adapter.snapshot(cluster="local", now=NOW))
            except KafkaUnavailable as error:
                errors.append(error)

    poller = threading.Thread(target=poll)
    poller.start()
    names: list[str] = []
    try:
        for round_number in range(3):
            names = [f"adapter-churn-{round_number}-{number}-{unique}" for number in range(10)]
            for future in admin.create_topics(
                [NewTopic(name, num_partitions=3, replication_factor=1) for name in names]
            ).values():
                future.result(timeout=30)
            # Delete only once a poll has seen this round's topics (on a loaded machine a poll
            # can take longer than any fixed pause).
            round_names = set(names)
            wait_until(lambda: any(t.name in round_names for snapshot in list(snapshots) for t in snapshot.topics),
                       timeout=60, interval=0.05, what=f"a poll to see round {round_number}'s topics")
            for future in admin.delete_topics(names, operation_timeout=30).values():
                future.result(timeout=60)
            names = []
            wait_until(lambda: snapshots and not any(t.name in round_names for t in snapshots[-1].topics),
                       timeout=60, interval=0.05, what=f"a poll to see round {round_number}'s topics gone")
    finally:
        stop.set()
        poller.join(timeout=60)
        if names:
            admin.delete_topics(names, operation_timeout=30)

    assert errors == []
    churned = [topic for snapshot in snapshots for topic in snapshot.topics if topic.name.endswith(f"-{unique}")]
    assert churned, "no poll saw a topic of this test"
    assert all(topic.partition_ids == frozenset({0, 1, 2}) for topic in churned)

@pytest.mark.parametrize(
    ("protocol", "group_type", "assignor"),
    [
        # librdkafka's default partition.assignment.strategy is "range,roundrobin".
        ("classic", "classic", "range"),
        # KIP-848: the broker assigns, with its default "uniform" assignor.
        ("consumer", "consumer", "uniform"),
    ],
)
def test_it_reads_a_running_group_then_the_same_group_empty_after_its_consumer_closes(
    adapter, make_topic, group_ids, unique, kafka_bootstrap, protocol, group_type, assignor
):
    topic = make_topic(f"live-{protocol}", 3)
    produce(kafka_bootstrap, topic, {0: 3, 1: 5, 2: 7})
    group_id = f"adapter-live-{protocol}-{unique}"
    client_id = f"gapwatch-test-{unique}"
    group_ids.append(group_id)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group_id,
            "client.id": client_id,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        consume(consumer, 15)
        consumer.commit(asynchronous=False)

        def stable_group():
            consumer.poll(0.1)  # serve rebalance callbacks while we wait
            group = group_in(adapter.snapshot(cluster="local", now=NOW), group_id)
            return group if group is not None and group.state == "Stable" else None

        group = wait_until(stable_group, what=f"{group_id} to be Stable")
        assert (group.type, group.assignor) == (group_type, assignor)
        [member] = group.members
        assert member.member_id
        assert member.client_id == client_id
        assert "127.0.0.1" in member.host
        assert member.assignment == frozenset({(topic, 0), (topic, 1), (topic, 2)})
        assert group.committed == {(topic, 0): 3, (topic, 1): 5, (topic, 2): 7}
        assert group.owner_of(topic, 1) == member
    finally:
        consumer.close()

    group = group_in(adapter.snapshot(cluster="local", now=NOW), group_id)
    assert group is not None
    assert (group.state, group.type, group.members) == ("Empty", group_type, ())
    assert group.committed == {(topic, 0): 3, (topic, 1): 5, (topic, 2): 7}


def test_it_leaves_owned_partitions_without_a_commit_out_of_committed(
    adapter, make_topic, group_ids, unique, kafka_bootstrap
):
    # Messages only on partition 0: the consumer owns 1 and 2 but never
    # stores or commits an offset there, like a freshly added partition.
    topic = make_topic("nocommit", 3)
    produce(kafka_bootstrap, topic, {0: 4})
    group_id = f"adapter-nocommit-{unique}"
    group_ids.append(group_id)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        consume(consumer, 4)
        consumer.commit(asynchronous=False)

        def owned_group():
            consumer.poll(0.1)
            group = group_in(adapter.snapshot(cluster="local", now=NOW), group_id)
            return group if group is not None and group.state == "Stable" else None

        group = wait_until(owned_group, what=f"{group_id} to be Stable")
        assert group.members[0].assignment == frozenset({(topic, 0), (topic, 1), (topic, 2)})
        assert group.committed == {(topic, 0): 4}
        assert group.topics() == frozenset({topic})
    finally:
        consumer.close()


def test_it_fetches_every_groups_offsets_with_bounded_concurrency(
    admin, make_topic, group_ids, unique, kafka_bootstrap
):
    topic = make_topic("bounded", 2)
    produce(kafka_bootstrap, topic, {0: 50, 1: 50})
    expected: dict[str, dict[tuple[str, int], int]] = {}
    futures = []
    for number in range(40):
        group_id = f"adapter-bounded-{number:02d}-{unique}"
        group_ids.append(group_id)
        # Some groups commit on one partition only, so offsets cannot be swapped unnoticed.
        offsets = [TopicPartition(topic, 0, number + 1)]
        if number % 2:
            offsets.append(TopicPartition(topic, 1, 50 - number))
        expected[group_id] = {(tp.topic, tp.partition): tp.offset for tp in offsets}
        futures += admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, offsets)], request_timeout=30
        ).values()
    for future in futures:
        future.result(timeout=30)
    bounded = KafkaAdapter(ClusterConfig(bootstrap_servers=kafka_bootstrap), timeout=10.0, max_in_flight=4)

    snapshot = bounded.snapshot(cluster="local", now=NOW)

    read = {group.group_id: group for group in snapshot.groups if group.group_id in expected}
    assert sorted(read) == sorted(expected)
    for group_id, committed in expected.items():
        assert read[group_id].committed == committed, group_id
        assert (read[group_id].state, read[group_id].members) == ("Empty", ())
    assert bounded.last_peak_in_flight["offsets"] <= 4


def test_it_raises_within_the_timeout_naming_the_bootstrap_when_unreachable():
    # Nothing listens on port 1 of the loopback.
    # How long it takes to give up (about the timeout): bench/timeouts_bench.py, not a bound here.
    adapter = KafkaAdapter(ClusterConfig(bootstrap_servers="127.0.0.1:1"), timeout=3.0)

    with pytest.raises(KafkaUnavailable) as raised:
        adapter.snapshot(cluster="dead", now=NOW)

    assert "127.0.0.1:1" in str(raised.value)
    assert (raised.value.stage, raised.value.bootstrap_servers) == ("topics", "127.0.0.1:1")
    with pytest.raises(KafkaUnavailable, match="127.0.0.1:1"):
        adapter.ping()


def test_it_never_shows_the_sasl_password(kafka_bootstrap, unique):
    # The local broker speaks PLAINTEXT only, so the SASL handshake fails.
    password = f"pw-{unique}-do-not-show"
    config = ClusterConfig(
        bootstrap_servers=kafka_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="gapwatch",
        sasl_password=password,
    )
    adapter = KafkaAdapter(config, timeout=3.0)

    errors = []
    for call in (lambda: adapter.snapshot(cluster="sasl", now=NOW), adapter.ping):
        with pytest.raises(KafkaUnavailable) as raised:
            call()
        errors.append(raised.value)

    for error in errors:
        assert kafka_bootstrap in str(error)
        shown = [str(error), repr(error), "".join(traceback.format_exception(error))]
        assert not any(password in text for text in shown)
    assert password not in str(config) and password not in repr(config)
