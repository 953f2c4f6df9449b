"""Small ORM factories for tests that need stored state without a poll."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.contrib.auth.hashers import PBKDF2PasswordHasher

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, PartitionGeneration, Topic

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=dt_timezone.utc)
HOSTILE_GROUP_ID = "<script>alert(1)</script> \"q'uote\" & spaces?=&page=9#frag 🦄 %20+"


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 with 1,000 iterations instead of 1,200,000 (about 2 s a
    hash on the two busy cores of a test run; the suite hashes hundreds of
    passwords). Same algorithm name, and a hash carries its iterations, so a
    server process a test starts (gunicorn, a Celery worker) with Django's own
    hashers checks these passwords too. tests/conftest.py installs it."""

    iterations = 1000


def make_cluster(name: str = "prod", **fields) -> Cluster:
    return Cluster.objects.create(name=name, bootstrap_servers=f"{name}-kafka:9092", **fields)


def make_topic(cluster: Cluster, name: str = "orders", **fields) -> Topic:
    defaults = {"kafka_topic_id": f"id-{cluster.name}-{name}", "partition_count": 3, "first_seen_at": NOW}
    defaults.update(fields)
    return Topic.objects.create(cluster=cluster, name=name, updated_at=NOW, **defaults)


def make_generation(topic: Topic, number: int = 1, partitions: tuple[int, ...] = (0, 1, 2)) -> PartitionGeneration:
    return PartitionGeneration.objects.create(
        topic=topic,
        number=number,
        kafka_topic_id=topic.kafka_topic_id,
        partitions=list(partitions),
        observed_at=NOW,
    )


def make_group(cluster: Cluster, group_id: str = "billing", **fields) -> ConsumerGroup:
    defaults = {"state": "Stable", "type": "classic", "assignor": "range", "member_count": 1, "first_seen_at": NOW,
                "last_seen_at": NOW}
    defaults.update(fields)
    return ConsumerGroup.objects.create(cluster=cluster, group_id=group_id, **defaults)


def make_group_topic(group: ConsumerGroup, topic: Topic, lag: int) -> GroupTopic:
    return GroupTopic.objects.create(group=group, topic=topic, lag=lag, first_seen_at=NOW, updated_at=NOW)


def make_finding(
    group: ConsumerGroup, generation: PartitionGeneration, partition: int = 2, *, minutes_ago: int = 0, **fields
) -> Finding:
    defaults = {
        "state": Finding.State.GAP,
        "first_log_start": 0,
        "log_start_offset": 0,
        "high_watermark": 100,
        "committed_offset": 60,
        "lag": 40,
        "missed_definite": 30,
        "missed_possible": 10,
        "backfill_start": 0,
        "backfill_end": 40,
        "policy_source": "assumed",
        "explanation": "assumed latest",
        "owner_client_id": "client-1",
        "owner_host": "/10.0.0.1",
    }
    defaults.update(fields)
    found_at = NOW - timedelta(minutes=minutes_ago)
    return Finding.objects.create(
        cluster=group.cluster,
        group=group,
        topic=generation.topic,
        generation=generation,
        partition=partition,
        created_at=found_at,
        updated_at=found_at,
        **defaults,
    )


def user_with_role(username: str, role: str | None):
    """A user in one of the roles (viewer, approver) of groups.roles, or none.

    The roles are ensured first: a transactional test's flush removes what
    the data migration created."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from groups.roles import ensure_roles

    ensure_roles()
    user = get_user_model().objects.create_user(username, password="pw-" + username)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


# A quote, a backslash and a newline: the three characters Prometheus' text format escapes.
HOSTILE_METRICS_GROUP_ID = 'we"ird\\group\nname'


def make_metrics_state() -> None:
    """The stored state /metrics is checked against: prod (ok, polled) with findings and lags; stage (unreachable, never
    polled) with nothing. Comments give each row's part in the numbers."""
    prod = make_cluster(
        "prod", status=Cluster.Status.OK, last_poll_at=NOW, last_poll_duration_ms=1500, polls_total=42,
        poll_failures_total=3, slow_polls_total=4, skipped_polls_total=2,
    )
    make_cluster("stage", status=Cluster.Status.UNREACHABLE, polls_total=5, poll_failures_total=5)
    orders = make_topic(prod, "orders")
    payments = make_topic(prod, "payments")
    deleted = make_topic(prod, "old", deleted=True)
    orders_gen2 = make_generation(orders, 2, (0, 1, 2))
    orders_gen3 = make_generation(orders, 3, (0, 1, 2, 3))
    payments_gen = make_generation(payments, 1, (0,))
    billing = make_group(prod, "billing")
    hostile = make_group(prod, HOSTILE_METRICS_GROUP_ID, type="share")  # a share group (KIP-932): group_type="share"
    gone = make_group(prod, "gone", present=False)

    # gap: lag series, counted, missed 30 + 10.
    make_finding(billing, orders_gen2, 2, state=Finding.State.GAP, lag=40, missed_definite=30, missed_possible=10)
    # expired: counted, missed 20 + 7.
    make_finding(hostile, orders_gen2, 2, state=Finding.State.EXPIRED, lag=5, missed_definite=20, missed_possible=7)
    # pending: its (made-up) missed numbers must not be summed.
    make_finding(billing, orders_gen3, 3, state=Finding.State.PENDING, lag=100, missed_definite=1000, missed_possible=1000)
    # covered: lag 0, missed numbers not summed.
    make_finding(billing, payments_gen, 0, state=Finding.State.COVERED, lag=0, missed_definite=0, missed_possible=500)
    # Closed: no series, not counted, not summed.
    make_finding(hostile, orders_gen2, 1, state=Finding.State.GAP, lag=9, missed_definite=900, closed_at=NOW)

    make_group_topic(billing, orders, 140)
    make_group_topic(billing, payments, 0)
    make_group_topic(hostile, orders, 5)
    make_group_topic(gone, orders, 99)  # group no longer listed: no series
    make_group_topic(billing, deleted, 12)  # topic deleted: no series
