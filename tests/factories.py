"""Small ORM factories for tests that need stored state without a poll."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, PartitionGeneration, Topic

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=dt_timezone.utc)
HOSTILE_GROUP_ID = "<script>alert(1)</script> \"q'uote\" & spaces?=&page=9#frag 🦄 %20+"


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
    defaults = {"state": "Stable", "type": "classic", "assignor": "range", "member_count": 1}
    defaults.update(fields)
    return ConsumerGroup.objects.create(cluster=cluster, group_id=group_id, first_seen_at=NOW, last_seen_at=NOW, **defaults)


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
