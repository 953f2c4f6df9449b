"""The browse pages: one topic (its generations and readers), one group (its
open findings, lag chart and its marks) and the audit log."""

from __future__ import annotations

from datetime import datetime

from django.db.models import (
    BigIntegerField,
    Count,
    F,
    FloatField,
    Func,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Floor

from groups.models import AuditEvent, Cluster, ConsumerGroup, Finding, GroupTopic, LagSample, PartitionGeneration, Topic


def _open_findings_count(field: str) -> Coalesce:
    counts = (Finding.objects.filter(**{field: OuterRef("pk")}, closed_at__isnull=True).order_by().values(field)
              .annotate(count=Count("id")).values("count"))
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


# The list pages' orders, by the name a page offers: (what the page calls it, the
# ordering); every one ends on cluster, name and id, so pages never overlap.
GROUP_SORTS = {
    "name": ("name", ("cluster__name", "group_id", "id")),
    "lag": ("lag, highest first", ("-total_lag", "cluster__name", "group_id", "id")),
    "findings": ("open findings, most first", ("-open_findings", "cluster__name", "group_id", "id")),
    "state": ("state", ("state", "cluster__name", "group_id", "id")),
    "last_seen": ("last seen by a poll, latest first", ("-last_seen_at", "cluster__name", "group_id", "id")),
}
TOPIC_SORTS = {
    "name": ("name", ("cluster__name", "name", "id")),
    "findings": ("open findings, most first", ("-open_findings", "cluster__name", "name", "id")),
    "groups": ("groups reading it, most first", ("-reader_count", "cluster__name", "name", "id")),
    "partitions": ("partitions, most first", ("-partition_count", "cluster__name", "name", "id")),
    "changed": ("last changed, latest first", ("-updated_at", "cluster__name", "name", "id")),
}


def groups_browse(
    *, cluster: str | None = None, search: str | None = None, gone: bool | None = False, sort: str = "name",
) -> QuerySet[ConsumerGroup]:
    """The groups list page: groups ordered by ``sort`` (a key of GROUP_SORTS),
    narrowed to a cluster name and part of a group id (ignoring case); only the
    groups the last poll saw (``gone=False``), only gone ones (True) or both
    (None). Each has ``open_findings``, ``topic_count`` and ``total_lag`` (over
    its topics at the last poll); no per-partition rows."""
    lags = (GroupTopic.objects.filter(group=OuterRef("pk")).order_by().values("group")
            .annotate(total=Sum("lag"), topics=Count("id")))
    queryset = ConsumerGroup.objects.select_related("cluster").defer("members").annotate(
        open_findings=_open_findings_count("group"),
        total_lag=Coalesce(Subquery(lags.values("total"), output_field=BigIntegerField()), 0),
        topic_count=Coalesce(Subquery(lags.values("topics"), output_field=IntegerField()), 0),
    )
    if cluster:
        queryset = queryset.filter(cluster__name=cluster)
    if search:
        queryset = queryset.filter(group_id__icontains=search)
    if gone is not None:
        queryset = queryset.filter(present=not gone)
    return queryset.order_by(*GROUP_SORTS[sort][1])


def topics_browse(
    *, cluster: str | None = None, search: str | None = None, deleted: bool | None = False, sort: str = "name",
) -> QuerySet[Topic]:
    """The topics list page: topics ordered by ``sort`` (a key of TOPIC_SORTS),
    narrowed like ``groups_browse``; only topics that exist (``deleted=False``),
    only deleted ones (True) or both (None). Each has ``reader_count`` (groups
    reading it), ``open_findings`` and ``latest_generation``."""
    readers = (GroupTopic.objects.filter(topic=OuterRef("pk")).order_by().values("topic")
               .annotate(count=Count("id")).values("count"))
    latest = PartitionGeneration.objects.filter(topic=OuterRef("pk")).order_by("-number").values("number")[:1]
    queryset = Topic.objects.select_related("cluster").annotate(
        open_findings=_open_findings_count("topic"),
        reader_count=Coalesce(Subquery(readers, output_field=IntegerField()), 0),
        latest_generation=Subquery(latest),
    )
    if cluster:
        queryset = queryset.filter(cluster__name=cluster)
    if search:
        queryset = queryset.filter(name__icontains=search)
    if deleted is not None:
        queryset = queryset.filter(deleted=deleted)
    return queryset.order_by(*TOPIC_SORTS[sort][1])


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
                                 "generation__added_partitions", "missed_definite", "missed_possible")
    marks, generations = [], {}
    for topic_id, partition, picked_at, generation_id, observed_at, added, definite, possible in rows:
        if start <= observed_at <= end:
            added = sorted(added) or [partition]
            generations[generation_id] = (
                observed_at, f"{names[topic_id]}: partition{'s' if len(added) > 1 else ''} "
                f"{', '.join(map(str, added))} added", "added")
        if picked_at is not None and start <= picked_at <= end:
            missed = f": {definite} missed" + (f", {possible} possibly" if possible else "")
            marks.append((picked_at, f"{names[topic_id]}[{partition}] picked up by the group{missed}", "picked_up"))
    return sorted(generations.values()) + marks


def group_chart_extent(*, group: ConsumerGroup, topic_ids: list[int], since: datetime) -> tuple[datetime | None,
                                                                                           datetime | None]:
    """(earliest event, earliest lag sample) of the group's chart since
    ``since``: when a generation that opened one of its findings on these
    topics was observed, or a pickup; None where there is none."""
    firsts = Finding.objects.filter(group=group, topic_id__in=topic_ids).aggregate(
        added=Min("generation__observed_at", filter=Q(generation__observed_at__gte=since)),
        picked=Min("pickup_before", filter=Q(pickup_before__gte=since)),
    )
    added, picked = firsts["added"], firsts["picked"]
    sampled = LagSample.objects.filter(group=group, topic_id__in=topic_ids, at__gte=since).aggregate(at=Min("at"))["at"]
    events = [at for at in (added, picked) if at is not None]
    return (min(events) if events else None), sampled


def audit_events_list(
    *,
    action: str | None = None,
    actor: str | None = None,
    cluster: Cluster | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
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
    if object_id:
        queryset = queryset.filter(object_id=object_id)
    if at_from is not None:
        queryset = queryset.filter(at__gte=at_from)
    if at_before is not None:
        queryset = queryset.filter(at__lt=at_before)
    return queryset.order_by("-at", "-id")


def audit_object_names(*, ids: dict[str, set[int]]) -> dict[str, dict[int, tuple[str, ...]]]:
    """The names that address the audited topics, groups and clusters of
    ``ids`` (object type -> row ids): per type, per id that still exists,
    (cluster, topic), (cluster, group id) or (cluster,)."""
    topics = Topic.objects.filter(pk__in=ids.get("topic", ())).values_list("pk", "cluster__name", "name")
    groups = ConsumerGroup.objects.filter(pk__in=ids.get("group", ())).values_list("pk", "cluster__name", "group_id")
    clusters = Cluster.objects.filter(pk__in=ids.get("cluster", ())).values_list("pk", "name")
    return {kind: {pk: tuple(names) for pk, *names in rows}
            for kind, rows in (("topic", topics), ("group", groups), ("cluster", clusters))}


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
