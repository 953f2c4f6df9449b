"""What the watcher (``tasks/watching.py``) compares and observes between
full polls, from stored state."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, Topic


@dataclass(frozen=True)
class ObservationInputs:
    """What a poll or a watcher tick starts from, read once and handed down:

    - ``cluster``: the row (its client settings, its name);
    - ``known_counts``: the stored partition count of every live topic;
    - ``watched``: topics of open findings still being picked up: nobody
      took the partition yet (pending); taken without a first commit
      (undecided), for FIRST_COMMIT_WATCH_SECONDS after it was taken, so the
      first commit, the upper bound, is seen when it comes (full polls go on
      looking after that); or taken with a likely start still to resolve;
    - ``open_topics``: the topics of every open finding (their log starts are read);
    - ``likely_due``: open findings taken before ``likely_due_before`` whose
      likely start is not resolved yet, as dicts (group, topic, partition,
      generation, pickup_before).
    """

    cluster: Cluster
    known_counts: dict[str, int]
    watched: set[str]
    open_topics: set[str]
    likely_due: list[dict]


_OPEN_FIELDS = ("topic__name", "state", "pickup_before", "likely_start", "guard_start_offset", "group__group_id",
                "partition", "generation__number")


def _open_findings(cluster_id: int) -> list[dict]:
    """The cluster's open findings, the fields the observation needs: one query."""
    return list(Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True).values(*_OPEN_FIELDS))


def _still_picked_up(row: dict, taken_since: datetime) -> bool:
    if row["state"] == Finding.State.UNOWNED:
        return False
    taken = row["pickup_before"]
    return (row["state"] == Finding.State.PENDING
            or (row["state"] == Finding.State.UNDECIDED and taken is not None and taken >= taken_since)
            or (taken is not None and row["likely_start"] is None and row["guard_start_offset"] is None))


def _watched(rows: list[dict]) -> set[str]:
    taken_since = timezone.now() - timedelta(seconds=settings.FIRST_COMMIT_WATCH_SECONDS)
    return {row["topic__name"] for row in rows if _still_picked_up(row, taken_since)}


def observation_inputs(*, cluster_id: int, likely_due_before: datetime) -> ObservationInputs:
    """Three queries: the cluster, its topics' counts, its open findings
    (Cluster.DoesNotExist when the cluster is gone)."""
    cluster = Cluster.objects.get(id=cluster_id)
    counts = dict(Topic.objects.filter(cluster_id=cluster_id, deleted=False).values_list("name", "partition_count"))
    rows = _open_findings(cluster_id)
    likely_due = [row for row in rows if row["pickup_before"] is not None
                  and row["pickup_before"] <= likely_due_before
                  and row["likely_start"] is None and row["guard_start_offset"] is None]
    return ObservationInputs(cluster=cluster, known_counts=counts, watched=_watched(rows),
                             open_topics={row["topic__name"] for row in rows}, likely_due=likely_due)


def watched_topics(*, cluster_id: int) -> set[str]:
    """``ObservationInputs.watched`` as stored now: after a tick's write, which may have decided some."""
    return _watched(_open_findings(cluster_id))


def topic_readers(*, cluster_id: int, topics: Collection[str]) -> set[str]:
    """The groups that read any of ``topics`` (from earlier polls). Asked only
    when a tick observes topics: every group of a big cluster, every second,
    was most of an idle tick's cost."""
    return set(GroupTopic.objects.filter(topic__cluster_id=cluster_id, topic__name__in=list(topics))
               .values_list("group__group_id", flat=True).distinct())


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
