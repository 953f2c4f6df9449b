"""What the watcher (``tasks/watching.py``) compares and observes between
full polls, from stored state."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from groups.models import ConsumerGroup, Finding, GroupTopic, Topic


def cluster_watch_state(*, cluster_id: int) -> tuple[dict[str, int], set[str]]:
    """What the watcher compares and observes every tick, from stored state:

    - the stored partition count of every live topic;
    - topics of open findings still being picked up: nobody took the
      partition yet (pending); taken without a first commit (undecided), for
      FIRST_COMMIT_WATCH_SECONDS after it was taken, so the first commit, the
      upper bound, is seen when it comes (full polls go on looking after
      that); or taken with a likely start still to resolve.
    """
    counts = dict(Topic.objects.filter(cluster_id=cluster_id, deleted=False).values_list("name", "partition_count"))
    open_findings = Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True)
    taken_since = timezone.now() - timedelta(seconds=settings.FIRST_COMMIT_WATCH_SECONDS)
    watched = set(
        open_findings.filter(
            Q(state=Finding.State.PENDING)
            | Q(state=Finding.State.UNDECIDED, pickup_before__gte=taken_since)
            | Q(pickup_before__isnull=False, likely_start__isnull=True, guard_start_offset__isnull=True)
        ).exclude(state=Finding.State.UNOWNED).values_list("topic__name", flat=True)
    )
    return counts, watched


def topic_readers(*, cluster_id: int, topics: Collection[str]) -> set[str]:
    """The groups that read any of ``topics`` (from earlier polls). Asked only
    when a tick observes topics: every group of a big cluster, every second,
    was most of an idle tick's cost."""
    return set(GroupTopic.objects.filter(topic__cluster_id=cluster_id, topic__name__in=list(topics))
               .values_list("group__group_id", flat=True).distinct())


def findings_awaiting_likely_start(*, cluster_id: int, taken_before: datetime) -> list[dict]:
    """Open findings taken (``pickup_before``) before ``taken_before`` whose likely start is not resolved yet."""
    return list(
        Finding.objects.filter(
            cluster_id=cluster_id, closed_at__isnull=True, pickup_before__isnull=False,
            pickup_before__lte=taken_before, likely_start__isnull=True, guard_start_offset__isnull=True,
        ).values("group__group_id", "topic__name", "partition", "generation__number", "pickup_before")
    )


def java_group_ids(*, cluster_id: int, among: Collection[str]) -> dict[str, set[str]]:
    """Which of ``among`` are stored as share or streams groups, by type: the
    adapter reads those through Kafka's Java client, the others through
    confluent-kafka."""
    found: dict[str, set[str]] = {"share": set(), "streams": set()}
    for group_id, kind in ConsumerGroup.objects.filter(
        cluster_id=cluster_id, type__in=list(found), group_id__in=list(among)
    ).values_list("group_id", "type"):
        found[kind].add(group_id)
    return found
