"""The problem scenario end to end, on the real broker, with real consumers,
polled by the real adapter and written to the real database (no mocks)."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from gapwatch_guard.keys import guard_starts_key, known_partitions_key

from groups.services import known_partitions
from groups.models import AuditEvent, Cluster, ConsumerGroup, Finding, PartitionGeneration, Topic
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import GroupConsumer, group_committed, wait_until
from tests.harness.scenarios import K, findings, poll, produce_one_each, start_consuming_group

def wait_for_commits(cluster, topic, group_id, partitions, at_least: dict[int, int]):
    """Poll until the group committed at least the given offsets on those partitions."""

    def committed_enough():
        poll(cluster)
        rows = findings(topic, group_id)
        return all(
            rows[p].committed_offset is not None and rows[p].committed_offset >= at_least[p] for p in partitions
        )

    wait_until(committed_enough, timeout=60, interval=0.5, what=f"{group_id} commits {at_least}")


@pytest.mark.django_db(transaction=True)
def test_a_latest_group_misses_exactly_what_was_written_before_it_picked_the_new_partitions_up(
    broker, cluster, unique, settings
):
    topic, group_id = f"orders-{unique}", f"latest-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    assert findings(topic, group_id) == {}

    broker.raise_partitions(topic, 4)
    for partition in (2, 3):
        broker.produce(topic, partition, K)
    summary = poll(cluster)

    # Nobody owns the new partitions yet: pending, every message at risk.
    rows = findings(topic, group_id)
    assert sorted(rows) == [2, 3]
    for row in rows.values():
        assert (row.state, row.lag, row.committed_offset, row.generation.number) == ("pending", K, None, 2)
        assert row.owner_client_id == ""
    assert {(f["topic"], f["partition"]) for f in summary.new_findings if f["group"] == group_id} == {
        (topic, 2), (topic, 3)
    }
    generation = PartitionGeneration.objects.get(topic__name=topic, number=2)
    assert (generation.partitions, generation.added_partitions) == ([0, 1, 2, 3], [2, 3])
    # Guards are told the new partitions are not known to the group yet.
    assert known_partitions.read(cluster="local", topic=topic, group_id=group_id) == {0, 1}

    # The group's clients pick the partitions up (here: restart, as clients
    # that never refresh do) and start at the end, because of `latest`.
    consumer.close()
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: consumer.assigned == {0, 1, 2, 3}, what="new partitions assigned")
        wait_until(lambda: poll(cluster) and all(r.owner_client_id for r in findings(topic, group_id).values()),
                   what="owner seen")
        [member] = ConsumerGroup.objects.get(group_id=group_id).members
        assert member["client_id"] == f"{group_id}-client"
        assert sorted(tuple(pair) for pair in member["assignment"]) == [(topic, p) for p in range(4)]
        # It reads only what is produced after it took its start position. The time index's estimate
        # needs a message written at or after pickup_before + PICKUP_GRACE_MS, so the messages are
        # written from then on (a consumer that read one written sooner left the index none to find).
        written_from = max(r.pickup_before for r in findings(topic, group_id).values()) + timedelta(
            milliseconds=settings.PICKUP_GRACE_MS)
        wait_until(lambda: timezone.now() >= written_from and produce_one_each(broker, topic, [2, 3])
                   and consumer.count(2) and consumer.count(3), interval=0.5, what="the group to read the new partitions")
        wait_until(lambda: poll(cluster) and all(
            r.committed_offset == r.high_watermark for r in findings(topic, group_id).values()
        ), interval=0.5, what="the group to commit up to the end")
    finally:
        consumer.close()

    poll(cluster)
    for row in findings(topic, group_id).values():
        assert row.state == "gap", row.explanation
        assert row.pre_pickup_high_watermark == K
        # Nothing declared: latest is only assumed, so nothing is definite and the sound range
        # [0, C_f) is possible; under latest, exactly the messages written before pickup are
        # missed, and [H_k, C_f) (written after the last pre-pickup poll and before the first
        # commit, the only observed bound on where a latest member started) may have been read.
        assert (row.missed_definite, row.missed_possible) == (0, row.first_commit)
        assert row.missed_definite_if_latest == K
        assert row.first_commit > K and row.missed_possible_if_latest == row.first_commit - K
        # The time index gives only an estimate, kept inside [H_k, C_f] and named with its evidence.
        assert row.likely_start is not None and K <= row.likely_start <= row.first_commit
        assert row.likely_start_evidence == "time index (CreateTime)"
        assert row.committed_offset == row.high_watermark and row.lag == 0
        assert row.policy_source == "assumed"
        assert (row.backfill_start, row.backfill_end) == (0, row.first_commit)
    assert known_partitions.read(cluster="local", topic=topic, group_id=group_id) == {0, 1, 2, 3}


@pytest.mark.django_db(transaction=True)
def test_an_earliest_group_working_through_the_backlog_slowly_is_covered_by_evidence(broker, cluster, unique):
    topic, group_id = f"slow-{unique}", f"earliest-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="earliest", delay=0.15)
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    assert findings(topic, group_id)[2].state == "pending"
    consumer.close()
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="earliest", delay=0.15)
    try:
        # Poll while it works through the backlog: a commit below K is proof.
        wait_until(lambda: poll(cluster) and findings(topic, group_id)[2].first_commit is not None,
                   interval=0.1, what="first commit")
    finally:
        consumer.close()
    row = findings(topic, group_id)[2]
    assert row.first_commit < K
    assert (row.state, row.policy_source, row.missed_definite) == ("covered", "evidenced", 0)


@pytest.mark.django_db(transaction=True)
def test_a_new_group_starting_below_the_end_is_proven_not_latest_and_its_later_finding_is_covered(
    broker, cluster, unique
):
    """A group's first start on a topic is evidence (DESIGN section 3): the
    poll before it existed read the topic's floors; its first commits below
    them prove it did not start at latest. Its finding on a later expansion,
    where it caught up within one commit interval, is then covered, not an
    assumed gap."""
    topic, group_id = f"first-{unique}", f"first-start-{unique}"
    broker.create_topic(topic, 2)
    broker.produce(topic, 0, 50)
    broker.produce(topic, 1, 50)
    poll(cluster)
    assert Topic.objects.get(cluster=cluster, name=topic).partition_floors == {"0": 50, "1": 50}
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="earliest", delay=0.05)
    try:
        wait_until(lambda: poll(cluster) and ConsumerGroup.objects.filter(
            group_id=group_id, evidenced_policy="earliest").exists(), interval=0.2, what="first-start evidence")
    finally:
        consumer.close()
    group = ConsumerGroup.objects.get(group_id=group_id)
    assert f"its first commits on {topic}" in group.policy_evidence and "below 50" in group.policy_evidence
    assert AuditEvent.objects.filter(action="group.policy_evidenced", object_id=str(group.id)).exists()

    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    assert findings(topic, group_id)[2].state == "pending"
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="earliest")
    try:
        wait_until(lambda: consumer.count(2) == K, what="the new partition read from its start")
        wait_for_commits(cluster, topic, group_id, [2], {2: K})
    finally:
        consumer.close()
    row = findings(topic, group_id)[2]
    assert row.first_commit >= K  # caught up within one commit interval: commits alone prove nothing
    assert (row.state, row.policy_source, row.missed_definite, row.missed_definite_if_latest) == (
        "covered", "evidenced", 0, None)


@pytest.mark.django_db(transaction=True)
def test_a_group_declared_earliest_is_covered_even_when_it_catches_up_at_once(broker, cluster, unique):
    topic, group_id = f"decl-{unique}", f"declared-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="earliest")
    ConsumerGroup.objects.filter(group_id=group_id).update(declared_policy="earliest")
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    consumer.close()
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="earliest")
    try:
        wait_until(lambda: consumer.count(2) == K, what="backlog consumed")
        wait_for_commits(cluster, topic, group_id, [2], {2: K})
    finally:
        consumer.close()
    row = findings(topic, group_id)[2]
    assert (row.state, row.policy_source, row.missed_definite, row.lag) == ("covered", "declared", 0, 0)


@pytest.mark.django_db(transaction=True)
@override_settings(UNOWNED_AFTER_POLLS=3)
def test_a_group_that_never_refreshes_leaves_the_partition_unowned(broker, cluster, unique):
    topic, group_id = f"stale-{unique}", f"stale-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    try:
        broker.raise_partitions(topic, 3)
        states = []
        for _ in range(3):
            broker.produce(topic, 2, 5)
            poll(cluster)
            states.append(findings(topic, group_id)[2].state)
    finally:
        consumer.close()
    assert states == ["pending", "pending", "unowned"]
    row = findings(topic, group_id)[2]
    assert (row.lag, row.polls_without_owner, row.committed_offset) == (15, 3, None)


@pytest.mark.django_db(transaction=True)
def test_a_failed_poll_changes_only_the_cluster_status(broker, cluster, unique, settings):
    topic, group_id = f"outage-{unique}", f"outage-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    try:
        broker.raise_partitions(topic, 3)
        broker.produce(topic, 2, 7)
        poll(cluster)
    finally:
        consumer.close()
    before = list(Finding.objects.order_by("id").values())
    topics_before = list(cluster.topics.order_by("id").values("name", "deleted", "partition_count"))

    # The cluster stops answering: its address now leads nowhere. (The shared broker keeps
    # running for the other tests; tests/faults stops real brokers of their own.)
    reachable = cluster.bootstrap_servers
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{probe.getsockname()[1]}"
    settings.KAFKA_TIMEOUT_SECONDS = 3
    Cluster.objects.filter(id=cluster.id).update(bootstrap_servers=nowhere)
    summary = poll_cluster(cluster_id=cluster.id)
    assert not summary.ok
    cluster.refresh_from_db()
    assert cluster.status == "unreachable" and cluster.last_error
    assert cluster.poll_failures_total == 1
    assert list(Finding.objects.order_by("id").values()) == before
    assert list(cluster.topics.order_by("id").values("name", "deleted", "partition_count")) == topics_before

    Cluster.objects.filter(id=cluster.id).update(bootstrap_servers=reachable)
    wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok, timeout=60, interval=1, what="poll once it answers")
    cluster.refresh_from_db()
    assert (cluster.status, cluster.last_error) == ("ok", "")
    assert findings(topic, group_id)[2].lag == 7


@pytest.mark.django_db(transaction=True)
def test_a_guard_report_makes_the_finding_exact(broker, cluster, unique, settings):
    import redis

    topic, group_id = f"guarded-{unique}", f"guarded-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    try:
        broker.raise_partitions(topic, 4)
        broker.produce(topic, 2, K)
        broker.produce(topic, 3, K)
        poll(cluster)
        assert {row.state for row in findings(topic, group_id).values()} == {"pending"}
        # One guard started partition 2 at its beginning, another started 3 late at 5.
        client = redis.Redis.from_url(settings.REDIS_URL)
        key = guard_starts_key(cluster="local", topic=topic, group_id=group_id)
        client.hsetnx(key, "2", 0)
        client.hsetnx(key, "3", 5)
        client.hsetnx(key, "3", 0)  # a later rebalance never overwrites the first report
        poll(cluster)
    finally:
        consumer.close()
        client.delete(key)
    rows = findings(topic, group_id)
    assert (rows[2].state, rows[2].policy_source, rows[2].guard_start_offset, rows[2].missed_definite) == (
        "covered", "guard", 0, 0
    )
    assert (rows[3].state, rows[3].policy_source, rows[3].guard_start_offset, rows[3].missed_definite) == (
        "gap", "guard", 5, 5
    )


@pytest.mark.django_db(transaction=True)
def test_known_partition_sets_follow_the_guard_contract(broker, cluster, unique, settings):
    """Published only for (topic, group) pairs seen before; a dismissed finding
    without a commit stays unknown; a recreated topic loses its sets and reports."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    topic, group_id = f"sets-{unique}", f"sets-{unique}"
    known_key = known_partitions_key(cluster="local", topic=topic, group_id=group_id)
    guard_key = guard_starts_key(cluster="local", topic=topic, group_id=group_id)
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    try:
        # The one poll that first saw the pair cannot know the group's first start.
        assert not client.exists(known_key)
        poll(cluster)
        assert known_partitions.read(cluster="local", topic=topic, group_id=group_id) == {0, 1}
        broker.raise_partitions(topic, 3)
        poll(cluster)
        Finding.objects.filter(topic__name=topic, partition=2).update(closed_at=timezone.now(),
                                                                        closed_reason="dismissed: test")
        poll(cluster)
        assert known_partitions.read(cluster="local", topic=topic, group_id=group_id) == {0, 1}
        client.hsetnx(guard_key, "2", 0)
    finally:
        consumer.close()
    broker.admin.delete_topics([topic])[topic].result(timeout=30)
    wait_until(lambda: topic not in broker.admin.list_topics(timeout=10).topics, what="topic deleted")
    broker.topics.remove(topic)
    broker.create_topic(topic, 3)
    poll(cluster)
    assert PartitionGeneration.objects.filter(topic__name=topic, is_new_lineage=True, number__gt=1).exists()
    assert not client.exists(guard_key) and not client.exists(known_key)


@pytest.mark.django_db(transaction=True)
def test_a_recreated_topic_expires_its_open_findings_audited_as_the_system(broker, cluster, unique):
    """The poll's way out (services/lifecycle.findings_expire): a topic deleted
    and created again took the missed offsets with it."""
    from groups.models import AuditEvent

    topic, group_id = f"gone-{unique}", f"gone-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    consumer.close()
    broker.raise_partitions(topic, 3)
    poll(cluster)
    (finding,) = findings(topic, group_id).values()
    broker.admin.delete_topics([topic])[topic].result(timeout=30)
    wait_until(lambda: topic not in broker.admin.list_topics(timeout=10).topics, what="topic deleted")
    broker.topics.remove(topic)
    broker.create_topic(topic, 3)
    wait_until(lambda: poll(cluster) and Finding.objects.get(id=finding.id).closed_at is not None, interval=0.5,
               what="the finding to be closed")
    finding.refresh_from_db()
    assert (finding.resolution, finding.closed_reason, finding.closed_by) == (
        "expired", "topic deleted or recreated: its offsets are gone", None)
    audited = AuditEvent.objects.get(action="finding.expired", object_id=str(finding.id))
    assert audited.system and audited.detail["reason"] == finding.closed_reason
    assert audited.detail["partition"] == 2 and audited.detail["group"] == group_id


@pytest.mark.django_db(transaction=True)
def test_a_topic_first_seen_already_read_and_raised_gets_findings_that_say_what_is_not_known(broker, cluster, unique):
    """Issue 41: no watcher ran, and the first poll to see the topic sees it
    raised already, its group reading it: no generation before shows which
    partitions were added, but the group's loss is never silent."""
    assert poll(cluster).ok, "the cluster was polled before: a topic seen for the first time now is new"
    topic, group_id = f"young-{unique}", f"young-reader-{unique}"
    broker.create_topic(topic, 1)
    broker.produce(topic, 0, 5)
    # Its clients refresh their metadata every 10 minutes: they do not know partition 1 yet.
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: broker.produce(topic, 0, 1) or group_committed(broker.admin, group_id, topic, [0])[0] > 0,
                   interval=0.5, what="the group to read and commit partition 0")
        broker.raise_partitions(topic, 2)
        broker.produce(topic, 1, K)
        poll(cluster)
    finally:
        consumer.close()
    generation = PartitionGeneration.objects.get(topic__name=topic)
    assert (generation.number, generation.is_new_lineage, generation.partitions) == (1, True, [0, 1])
    rows = findings(topic, group_id)
    # Partition 0's commit proves nothing either way (a group reading since the topic's creation commits
    # above its log start too). Nobody in the live group holds partition 1, nor committed there, and it
    # holds records: its clients do not know it yet. Pending, at risk, observed from now on: never silent.
    assert sorted(rows) == [1], {p: r.explanation for p, r in rows.items()}
    assert (rows[1].state, rows[1].lag, rows[1].pre_pickup_high_watermark) == ("pending", K, K), rows[1].explanation
