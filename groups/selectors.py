"""Reads. Keyword-only, typed, named ``<entity>_<action>``; views and the
metrics endpoint call these and never build querysets themselves.

Filters that name a cluster, topic or group accept either the model instance
or its name (the group id for a group), so a page with an object in hand and
an API with a query string can share one selector.
"""

from __future__ import annotations

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

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, PartitionGeneration, Topic

# States in which a finding reports messages the group missed.
MISSED_STATES = (Finding.State.GAP, Finding.State.EXPIRED)


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
) -> QuerySet[Finding]:
    """Findings, newest first, then by id so pages are stable.

    ``group`` as a string is an exact group id; ``state`` must be one of
    ``Finding.State`` (a ValueError otherwise: an unknown state is a caller
    bug, not an empty answer). Closed findings only with ``include_closed``.
    """
    if state is not None and state not in Finding.State.values:
        raise ValueError(f"unknown finding state {state!r}")
    queryset = Finding.objects.select_related("cluster", "topic", "group", "generation")
    queryset = _by_name(queryset, "cluster", "name", cluster)
    queryset = _by_name(queryset, "topic", "name", topic)
    queryset = _by_name(queryset, "group", "group_id", group)
    if state is not None:
        queryset = queryset.filter(state=state)
    if not include_closed:
        queryset = queryset.filter(closed_at__isnull=True)
    return queryset.order_by("-created_at", "id")


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


def findings_open_count_by_cluster_state() -> dict[tuple[str, str], int]:
    """Open findings counted by (cluster name, state); absent pairs have none."""
    rows = (
        Finding.objects.filter(closed_at__isnull=True)
        .order_by()
        .values_list("cluster__name", "state")
        .annotate(count=Count("id"))
    )
    return {(cluster, state): count for cluster, state, count in rows}


def findings_missed_by_cluster() -> dict[str, tuple[int, int]]:
    """(definite, possible) missed messages per cluster name, summed over open
    findings in the states that report missed messages (gap, expired)."""
    rows = (
        Finding.objects.filter(closed_at__isnull=True, state__in=MISSED_STATES)
        .order_by()
        .values_list("cluster__name")
        .annotate(definite=Sum("missed_definite"), possible=Sum("missed_possible"))
    )
    return {cluster: (definite, possible) for cluster, definite, possible in rows}


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
