"""What the watcher (``tasks/watching.py``) compares and observes between
full polls, from stored state."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q, QuerySet
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
      generation, pickup_before);
    - ``floors_due``: some live topic's floors (``Topic.partition_floors``)
      are missing or older than LAG_SAMPLE_INTERVAL_SECONDS: a full poll
      reads every partition's last stable offset.

    Three queries (the cluster, the counts, open findings per topic), a fourth
    only while some finding is due for its likely start.
    """

    cluster: Cluster
    known_counts: dict[str, int]
    watched: set[str]
    open_topics: set[str]
    likely_due: list[dict]
    floors_due: bool = False


def _still_picked_up() -> Q:
    """Open findings whose topic the watcher keeps observing (``ObservationInputs.watched``)."""
    taken_since = timezone.now() - timedelta(seconds=settings.FIRST_COMMIT_WATCH_SECONDS)
    return (Q(state=Finding.State.PENDING)
            | Q(state=Finding.State.UNDECIDED, pickup_before__gte=taken_since)
            | Q(pickup_before__isnull=False, likely_start__isnull=True, guard_start_offset__isnull=True)
            ) & ~Q(state=Finding.State.UNOWNED)


def _likely_due(before: datetime) -> Q:
    """Open findings taken before ``before`` whose likely start is not resolved yet."""
    return Q(pickup_before__isnull=False, pickup_before__lte=before, likely_start__isnull=True,
             guard_start_offset__isnull=True)


def _open_findings(cluster_id: int) -> QuerySet[Finding]:
    return Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True)


def observation_inputs(*, cluster_id: int, likely_due_before: datetime) -> ObservationInputs:
    """The cluster, its topics' counts and one row per topic of its open
    findings (filtered and counted in the database: a tick runs every second,
    and a cluster after a big expansion has thousands of open findings); the
    findings due for a likely start only when some are
    (Cluster.DoesNotExist when the cluster is gone)."""
    cluster = Cluster.objects.get(id=cluster_id)
    live = list(Topic.objects.filter(cluster_id=cluster_id, deleted=False).values_list(
        "name", "partition_count", "partition_floors_at"))
    counts = {name: count for name, count, _ in live}
    floors_before = timezone.now() - timedelta(seconds=settings.LAG_SAMPLE_INTERVAL_SECONDS)
    floors_due = any(at is None or at <= floors_before for _, _, at in live)
    per_topic = list(_open_findings(cluster_id).values("topic__name").annotate(
        watched=Count("id", filter=_still_picked_up()), due=Count("id", filter=_likely_due(likely_due_before))))
    likely_due = list(_open_findings(cluster_id).filter(_likely_due(likely_due_before)).values(
        "group__group_id", "topic__name", "partition", "generation__number", "pickup_before",
    )) if any(row["due"] for row in per_topic) else []
    return ObservationInputs(cluster=cluster, known_counts=counts,
                             watched={row["topic__name"] for row in per_topic if row["watched"]},
                             open_topics={row["topic__name"] for row in per_topic}, likely_due=likely_due,
                             floors_due=floors_due)


def watched_topics(*, cluster_id: int) -> set[str]:
    """``ObservationInputs.watched`` as stored now: after a tick's write, which may have decided some."""
    return set(_open_findings(cluster_id).filter(_still_picked_up()).values_list("topic__name", flat=True).distinct())


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
