"""Reads. Keyword-only, typed, named ``<entity>_<action>``; views and the
metrics endpoint call these and never build querysets themselves.

Filters that name a cluster, topic or group accept either the model instance
or its name (the group id for a group), so a page with an object in hand and
an API with a query string can share one selector.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, PartitionGeneration, RemediationJob, Topic

# States in which a finding reports messages the group missed (undecided: its
# definite part; it has no upper bound yet).
MISSED_STATES = (Finding.State.GAP, Finding.State.EXPIRED, Finding.State.UNDECIDED)


def _by_name(queryset: QuerySet, field: str, name_field: str, value: object) -> QuerySet:
    if value is None:
        return queryset
    if isinstance(value, str):
        return queryset.filter(**{f"{field}__{name_field}": value})
    return queryset.filter(**{field: value})


def findings_list(
    *,
    cluster: Cluster | str | None = None,
    topic: Topic | str | None = None,
    group: ConsumerGroup | str | None = None,
    state: str | None = None,
    include_closed: bool = False,
    topic_contains: str | None = None,
    group_contains: str | None = None,
    resolution: str | None = None,
    found_since: date | None = None,
    found_until: date | None = None,
) -> QuerySet[Finding]:
    """Findings, newest first, then by id so pages are stable.

    ``group`` as a string is an exact group id; ``topic_contains`` and
    ``group_contains`` match part of a name, ignoring case (what a person
    types). ``state`` must be one of ``Finding.State`` (a ValueError
    otherwise: an unknown state is a caller bug, not an empty answer).
    Closed findings only with ``include_closed``; ``resolution`` "open" or
    one of ``Finding.Resolution`` narrows by the way out. ``found_since`` and
    ``found_until`` are inclusive dates (UTC) of the finding's creation.
    """
    if state is not None and state not in Finding.State.values:
        raise ValueError(f"unknown finding state {state!r}")
    if resolution is not None and resolution not in ("open", *Finding.Resolution.values):
        raise ValueError(f"unknown resolution {resolution!r}")
    queryset = Finding.objects.select_related("cluster", "topic", "group", "generation", "closed_by")
    queryset = _by_name(queryset, "cluster", "name", cluster)
    queryset = _by_name(queryset, "topic", "name", topic)
    queryset = _by_name(queryset, "group", "group_id", group)
    if topic_contains:
        queryset = queryset.filter(topic__name__icontains=topic_contains)
    if group_contains:
        queryset = queryset.filter(group__group_id__icontains=group_contains)
    if state is not None:
        queryset = queryset.filter(state=state)
    if not include_closed or resolution == "open":
        queryset = queryset.filter(closed_at__isnull=True)
    elif resolution is not None:
        queryset = queryset.filter(closed_at__isnull=False, resolution=resolution)
    if found_since is not None:
        queryset = queryset.filter(created_at__date__gte=found_since)
    if found_until is not None:
        queryset = queryset.filter(created_at__date__lte=found_until)
    return queryset.order_by("-created_at", "id")


def findings_count_by_state_and_resolution(queryset: QuerySet[Finding]) -> dict[tuple[str, str], int]:
    """(state, resolution) -> count over ``queryset`` in one query; open
    findings have resolution "open" whatever their stored value."""
    rows = (
        queryset.order_by()
        .annotate(is_open=ExpressionWrapper(Q(closed_at__isnull=True), output_field=BooleanField()))
        .values_list("state", "resolution", "is_open")
        .annotate(count=Count("id"))
    )
    counts: dict[tuple[str, str], int] = {}
    for state, resolution, is_open, count in rows:
        key = (state, "open" if is_open else resolution or "closed")
        counts[key] = counts.get(key, 0) + count
    return counts


def clusters_list() -> QuerySet[Cluster]:
    """Clusters by name, with ``sasl_password_set`` annotated and the
    ciphertext deferred, so the encrypted password never leaves the database."""
    return (
        Cluster.objects.defer("sasl_password_encrypted")
        .annotate(sasl_password_set=ExpressionWrapper(~Q(sasl_password_encrypted=""), output_field=BooleanField()))
        .order_by("name", "id")
    )


def topics_list(*, cluster: Cluster | str | None = None) -> QuerySet[Topic]:
    """Topics by cluster and name, each with ``latest_generation`` (the
    highest partition generation number, None before the first one)."""
    latest = PartitionGeneration.objects.filter(topic=OuterRef("pk")).order_by("-number").values("number")[:1]
    queryset = Topic.objects.select_related("cluster").annotate(latest_generation=Subquery(latest))
    queryset = _by_name(queryset, "cluster", "name", cluster)
    return queryset.order_by("cluster__name", "name", "id")


def groups_list(*, cluster: Cluster | str | None = None) -> QuerySet[ConsumerGroup]:
    """Consumer groups by cluster and group id, each with ``open_findings``
    (a count) and its ``group_topics`` prefetched with their topics, by name."""
    open_findings = (
        Finding.objects.filter(group=OuterRef("pk"), closed_at__isnull=True)
        .order_by()
        .values("group")
        .annotate(count=Count("id"))
        .values("count")
    )
    queryset = (
        ConsumerGroup.objects.select_related("cluster")
        .annotate(open_findings=Coalesce(Subquery(open_findings, output_field=IntegerField()), 0))
        .prefetch_related(
            Prefetch("group_topics", queryset=GroupTopic.objects.select_related("topic").order_by("topic__name"))
        )
    )
    queryset = _by_name(queryset, "cluster", "name", cluster)
    return queryset.order_by("cluster__name", "group_id", "id")


def findings_open_lag_list() -> list[dict]:
    """Lag of every partition with an open finding, one row per (cluster,
    group, topic, partition): if a partition has open findings in several
    generations, the newest generation's wins, so no series is emitted twice.

    Rows: ``cluster``, ``group``, ``topic``, ``partition``, ``state``, ``lag``.
    """
    rows = (
        Finding.objects.filter(closed_at__isnull=True)
        .order_by("cluster_id", "group_id", "topic_id", "partition", "-generation__number", "-id")
        .distinct("cluster_id", "group_id", "topic_id", "partition")
        .values_list("cluster__name", "group__group_id", "topic__name", "partition", "state", "lag")
    )
    keys = ("cluster", "group", "topic", "partition", "state", "lag")
    return [dict(zip(keys, row)) for row in rows]


def findings_summary_by_cluster() -> dict[str, dict]:
    """Per cluster name, from one query over all findings:

    - ``open``: open findings counted by state;
    - ``missed``: (definite, possible) missed messages summed over open
      findings in the states that report them (gap, expired);
    - ``resolved``: closed findings counted by resolution;
    - ``recovered``: per job kind, (recovered, redelivered) messages summed
      over repaired findings.
    Absent keys mean none."""
    rows = (
        Finding.objects.order_by()
        .annotate(is_open=ExpressionWrapper(Q(closed_at__isnull=True), output_field=BooleanField()))
        .values_list("cluster__name", "is_open", "state", "resolution", "resolved_by_job__kind")
        .annotate(count=Count("id"), definite=Sum("missed_definite"), possible=Sum("missed_possible"),
                  recovered=Coalesce(Sum("recovered_messages"), 0), redelivered=Coalesce(Sum("redelivered_messages"), 0))
    )
    summary: dict[str, dict] = {}
    for cluster, is_open, state, resolution, kind, count, definite, possible, recovered, redelivered in rows:
        entry = summary.setdefault(cluster, {"open": {}, "missed": (0, 0), "resolved": {}, "recovered": {}})
        if is_open:
            entry["open"][state] = entry["open"].get(state, 0) + count
            if state in MISSED_STATES:
                entry["missed"] = (entry["missed"][0] + definite, entry["missed"][1] + possible)
        elif resolution:
            entry["resolved"][resolution] = entry["resolved"].get(resolution, 0) + count
            if resolution in (Finding.Resolution.REPAIRED, Finding.Resolution.PARTIAL) and kind:
                before = entry["recovered"].get(kind, (0, 0))
                entry["recovered"][kind] = (before[0] + recovered, before[1] + redelivered)
    return summary


def jobs_count_by_cluster_kind_status() -> dict[tuple[str, str, str], int]:
    """Remediation jobs counted by (cluster name, kind, status)."""
    rows = (
        RemediationJob.objects.order_by().values_list("cluster__name", "kind", "status").annotate(count=Count("id"))
    )
    return {(cluster, kind, status): count for cluster, kind, status, count in rows}


def group_topics_lag_list() -> list[dict]:
    """Total lag of every present group on every topic it consumes that still
    exists. Rows: ``cluster``, ``group``, ``topic``, ``lag``."""
    rows = (
        GroupTopic.objects.filter(group__present=True, topic__deleted=False)
        .order_by("group__cluster__name", "group__group_id", "topic__name")
        .values_list("group__cluster__name", "group__group_id", "topic__name", "lag")
    )
    keys = ("cluster", "group", "topic", "lag")
    return [dict(zip(keys, row)) for row in rows]


# --- Browse pages: topic, group, audit -------------------------------------
# Imported here so this section stays self-contained at the end of the file.
from django.db.models import F, FloatField, Func, Max, Value  # noqa: E402
from django.db.models.functions import Floor  # noqa: E402

from groups.models import AuditEvent, LagSample  # noqa: E402


def topic_generations_list(*, topic: Topic) -> QuerySet[PartitionGeneration]:
    """The partition generations of a topic, oldest first."""
    return PartitionGeneration.objects.filter(topic=topic).order_by("number", "id")


def topic_readers_list(*, topic: Topic) -> QuerySet[GroupTopic]:
    """The groups reading a topic (GroupTopic rows with their group), highest
    lag first, each with ``open_findings`` on this topic (a count)."""
    open_findings = (
        Finding.objects.filter(group=OuterRef("group_id"), topic=topic, closed_at__isnull=True)
        .order_by()
        .values("group")
        .annotate(count=Count("id"))
        .values("count")
    )
    return (
        GroupTopic.objects.filter(topic=topic)
        .select_related("group")
        .annotate(open_findings=Coalesce(Subquery(open_findings, output_field=IntegerField()), 0))
        .order_by("-lag", "group__group_id", "id")
    )


def group_open_findings_list(*, group: ConsumerGroup) -> QuerySet[Finding]:
    """Open findings of a group by topic name, partition and generation: the
    only partitions whose offsets Gapwatch stores one by one."""
    return (
        Finding.objects.filter(group=group, closed_at__isnull=True)
        .select_related("topic", "generation")
        .order_by("topic__name", "partition", "generation__number", "id")
    )


def group_lag_series(
    *, group: ConsumerGroup, topic_ids: list[int], start: datetime, end: datetime, buckets: int = 300
) -> dict[int, list[tuple[datetime, int]]]:
    """Lag samples of a group in [start, end), downsampled in the database to
    at most ``buckets`` points per topic: the window is cut into equal time
    buckets and each point is the bucket's highest lag, at its last sample."""
    width = max((end - start).total_seconds() / buckets, 1.0)
    epoch = Func(F("at"), template="EXTRACT(EPOCH FROM %(expressions)s)", output_field=FloatField())
    bucket = Floor((epoch - Value(start.timestamp())) / Value(width), output_field=IntegerField())
    rows = (
        LagSample.objects.filter(group=group, topic_id__in=topic_ids, at__gte=start, at__lt=end)
        .annotate(bucket=bucket)
        .values("topic_id", "bucket")
        .annotate(peak=Max("lag"), last_at=Max("at"))
        .order_by("topic_id", "bucket")
        .values_list("topic_id", "last_at", "peak")
    )
    series: dict[int, list[tuple[datetime, int]]] = {}
    for topic_id, at, lag in rows:
        series.setdefault(topic_id, []).append((at, lag))
    return series


def group_chart_marks(
    *, group: ConsumerGroup, topics: list[Topic], start: datetime, end: datetime
) -> list[tuple[datetime, str, str]]:
    """(at, label, kind) for the group's lag chart in [start, end], from the
    group's findings (open or closed) on the charted topics, in one query:
    when their generation added partitions ("added"), and when the group
    picked each new partition up ("picked_up": the first observation with an
    owner or a commit, the end of the finding's pickup bracket). Labels are
    plain text."""
    names = {topic.id: topic.name for topic in topics}
    rows = Finding.objects.filter(group=group, topic_id__in=list(names)).filter(
        Q(pickup_before__gte=start, pickup_before__lte=end)
        | Q(generation__observed_at__gte=start, generation__observed_at__lte=end)
    ).order_by("id").values_list("topic_id", "partition", "pickup_before", "generation_id", "generation__observed_at",
                                 "generation__added_partitions")
    marks, generations = [], {}
    for topic_id, partition, picked_at, generation_id, observed_at, added in rows:
        if start <= observed_at <= end:
            added = sorted(added) or [partition]
            generations[generation_id] = (
                observed_at, f"{names[topic_id]}: partition{'s' if len(added) > 1 else ''} "
                f"{', '.join(map(str, added))} added", "added")
        if picked_at is not None and start <= picked_at <= end:
            marks.append((picked_at, f"{names[topic_id]}[{partition}] picked up by the group", "picked_up"))
    return sorted(generations.values()) + marks


def audit_events_list(
    *,
    action: str | None = None,
    actor: str | None = None,
    cluster: Cluster | None = None,
    object_type: str | None = None,
    at_from: datetime | None = None,
    at_before: datetime | None = None,
) -> QuerySet[AuditEvent]:
    """Audit rows, newest first, in [at_from, at_before). ``actor`` is a
    username, or "system" for what the system did."""
    queryset = AuditEvent.objects.select_related("actor", "cluster")
    if action:
        queryset = queryset.filter(action=action)
    if actor == "system":
        queryset = queryset.filter(system=True)
    elif actor:
        queryset = queryset.filter(actor__username=actor)
    if cluster is not None:
        queryset = queryset.filter(cluster=cluster)
    if object_type:
        queryset = queryset.filter(object_type=object_type)
    if at_from is not None:
        queryset = queryset.filter(at__gte=at_from)
    if at_before is not None:
        queryset = queryset.filter(at__lt=at_before)
    return queryset.order_by("-at", "-id")


def audit_filter_values() -> dict[str, list[str]]:
    """Distinct actions and object types, and the usernames, to suggest in
    the audit filters."""
    from django.contrib.auth import get_user_model

    actions = AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()
    object_types = (
        AuditEvent.objects.exclude(object_type="").order_by("object_type").values_list("object_type", flat=True)
        .distinct()
    )
    actors = get_user_model().objects.order_by("username").values_list("username", flat=True)
    return {"actions": list(actions), "object_types": list(object_types), "actors": ["system", *actors]}


# --- the watcher (tasks/watching.py) -----------------------------------------


def cluster_watch_state(*, cluster_id: int) -> tuple[dict[str, int], dict[str, set[str]], set[str]]:
    """What the watcher compares and observes, from stored state:

    - the stored partition count of every live topic;
    - the groups that read each topic (from earlier polls);
    - topics of open findings still being picked up: nobody took the
      partition yet (pending); taken without a first commit (undecided), for
      FIRST_COMMIT_WATCH_SECONDS after it was taken, so the first commit, the
      upper bound, is seen when it comes (full polls go on looking after
      that); or taken with a likely start still to resolve.
    """
    counts = dict(Topic.objects.filter(cluster_id=cluster_id, deleted=False).values_list("name", "partition_count"))
    readers: dict[str, set[str]] = {}
    for topic, group_id in GroupTopic.objects.filter(topic__cluster_id=cluster_id).values_list(
        "topic__name", "group__group_id"
    ):
        readers.setdefault(topic, set()).add(group_id)
    open_findings = Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True)
    taken_since = timezone.now() - timedelta(seconds=settings.FIRST_COMMIT_WATCH_SECONDS)
    watched = set(
        open_findings.filter(
            Q(state="pending")
            | Q(state="undecided", pickup_before__gte=taken_since)
            | Q(pickup_before__isnull=False, likely_start__isnull=True, guard_start_offset__isnull=True)
        ).exclude(state="unowned").values_list("topic__name", flat=True)
    )
    return counts, readers, watched


def cluster_group_ids(*, cluster_id: int) -> set[str]:
    """Every group id stored for the cluster."""
    return set(ConsumerGroup.objects.filter(cluster_id=cluster_id).values_list("group_id", flat=True))


def findings_awaiting_likely_start(*, cluster_id: int, taken_before: datetime) -> list[dict]:
    """Open findings taken (``pickup_before``) before ``taken_before`` whose likely start is not resolved yet."""
    return list(
        Finding.objects.filter(
            cluster_id=cluster_id, closed_at__isnull=True, pickup_before__isnull=False,
            pickup_before__lte=taken_before, likely_start__isnull=True, guard_start_offset__isnull=True,
        ).values("group__group_id", "topic__name", "partition", "generation__number", "pickup_before")
    )
