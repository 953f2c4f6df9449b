"""The lists pages and the API share: findings (with their counts),
clusters, topics and consumer groups.

Filters that name a cluster, topic or group accept either the model instance
or its name (the group id for a group), so a page with an object in hand and
an API with a query string can share one selector.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    IntegerField,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce

from groups.domain.freshness import ClusterFreshness, cluster_freshness
from groups.domain.tls import certificate_expiries, certificates_expiring
from groups.domain.triage import (
    NOTHING_TO_REPAIR,
    ClusterOutline,
    ClusterTriage,
    GroupInfo,
    OpenFinding,
    Totals,
    triage_fill,
    triage_outline,
)
from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, JobFinding, PartitionGeneration, Topic
from groups.selectors.access import Scope, visible_findings
from groups.selectors.kinds import group_kind_q


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
    group_type: str | None = None,
    scope: Scope | None = None,
) -> QuerySet[Finding]:
    """Findings, newest first, then by id so pages are stable.

    ``group`` as a string is an exact group id; ``topic_contains`` and
    ``group_contains`` match part of a name, ignoring case (what a person
    types). ``state`` must be one of ``Finding.State`` (a ValueError
    otherwise: an unknown state is a caller bug, not an empty answer).
    Closed findings only with ``include_closed``; ``resolution`` "open" or
    one of ``Finding.Resolution`` narrows by the way out. ``found_since`` and
    ``found_until`` are inclusive dates (UTC) of the finding's creation.
    ``group_type``: one of ``groups.domain.group_kinds.GROUP_KINDS`` (a
    ValueError otherwise), the kind of the finding's group.
    ``scope``: only the findings it lets its holder read (team scopes).
    """
    if state is not None and state not in Finding.State.values:
        raise ValueError(f"unknown finding state {state!r}")
    if resolution is not None and resolution not in ("open", *Finding.Resolution.values):
        raise ValueError(f"unknown resolution {resolution!r}")
    queryset = Finding.objects.select_related("cluster", "topic", "group", "generation", "closed_by")
    if scope is not None:
        queryset = visible_findings(scope, queryset)
    queryset = _by_name(queryset, "cluster", "name", cluster)
    queryset = _by_name(queryset, "topic", "name", topic)
    queryset = _by_name(queryset, "group", "group_id", group)
    if topic_contains:
        queryset = queryset.filter(topic__name__icontains=topic_contains)
    if group_contains:
        queryset = queryset.filter(group__group_id__icontains=group_contains)
    if state is not None:
        queryset = queryset.filter(state=state)
    if group_type is not None:
        queryset = queryset.filter(group_kind_q(group_type, path="group__"))
    if not include_closed or resolution == "open":
        queryset = queryset.filter(closed_at__isnull=True)
    elif resolution is not None:
        queryset = queryset.filter(closed_at__isnull=False, resolution=resolution)
    if found_since is not None:
        queryset = queryset.filter(created_at__date__gte=found_since)
    if found_until is not None:
        queryset = queryset.filter(created_at__date__lte=found_until)
    return queryset.order_by("-created_at", "id")


def findings_selected(*, finding_ids: list[int]) -> QuerySet[Finding]:
    """The findings of a selection, open or closed, by id, each with
    ``active_job_id`` and ``active_job_status`` (None without an active job)."""
    active = JobFinding.objects.filter(finding=OuterRef("pk"), active=True).order_by("job_id")
    return (
        Finding.objects.filter(id__in=finding_ids)
        .select_related("cluster", "topic", "group")
        .annotate(active_job_id=Subquery(active.values("job_id")[:1]),
                  active_job_status=Subquery(active.values("job__status")[:1]))
        .order_by("id")
    )


def findings_triage_outline(
    *,
    cluster: Cluster | str | None = None,
    state: str | None = None,
    topic_contains: str | None = None,
    group_contains: str | None = None,
    group_type: str | None = None,
    scope: Scope | None = None,
    by_expiry: bool = False,
) -> tuple[ClusterOutline, ...]:
    """Open findings (narrowed like ``findings_list``) as the triage orders
    them, by cluster and group with totals (``groups.domain.triage``), from
    one query that sums them per group in the database: the home page reads
    the findings themselves only for the groups it shows
    (``findings_triage_groups``). Reading all 20,000 open findings to rank
    3,000 groups cost ~250 ms of CPU a view. ``by_expiry``: groups whose
    first missed record retention may delete soonest first (an estimate)."""
    rows = (
        findings_list(cluster=cluster, state=state, topic_contains=topic_contains, group_contains=group_contains,
                      group_type=group_type, scope=scope)
        .order_by()
        .values_list("group_id", "group__cluster__name", "group__group_id", "group__state", "group__member_count",
                     "group__type")
        .annotate(missed_definite=Sum("missed_definite"), missed_possible=Sum("missed_possible"),
                  partitions=Count("id"), covered=Count("id", filter=Q(state=NOTHING_TO_REPAIR)),
                  soonest_expiry=Min("urgency__expires_at", filter=~Q(state=NOTHING_TO_REPAIR)))
    )
    groups, totals = {}, {}
    for key, cluster_name, group_id, group_state, members, kind, definite, possible, partitions, covered, soonest \
            in rows:
        groups[key] = GroupInfo(key=key, cluster=cluster_name, group_id=group_id, state=group_state,
                                member_count=members, type=kind)
        totals[key] = Totals(missed_definite=definite, missed_possible=possible, partitions=partitions,
                             covered=covered, soonest_expiry=soonest)
    return triage_outline(totals=totals, groups=groups, by_expiry=by_expiry)


def findings_triage_groups(
    outline: tuple[ClusterOutline, ...],
    *,
    cluster: Cluster | str | None = None,
    state: str | None = None,
    topic_contains: str | None = None,
    group_contains: str | None = None,
    group_type: str | None = None,
    scope: Scope | None = None,
) -> tuple[ClusterTriage, ...]:
    """The groups of ``outline`` (a page of ``findings_triage_outline``,
    under the same filters) with their open findings by topic, each with
    its active job and a recommended repair, from one query."""
    active_job = JobFinding.objects.filter(finding=OuterRef("pk"), active=True).order_by("job_id").values("job_id")[:1]
    rows = (
        findings_list(cluster=cluster, state=state, topic_contains=topic_contains, group_contains=group_contains,
                      group_type=group_type, scope=scope)
        .filter(group_id__in=[item.group.key for shown in outline for item in shown.groups])
        .order_by()
        .annotate(active_job=Subquery(active_job))
        .values_list("id", "group_id", "topic__name", "partition", "state", "missed_definite", "missed_possible",
                     "log_start_offset", "high_watermark", "committed_offset", "active_job", "urgency__expires_at")
    )
    return triage_fill(outline, findings=[OpenFinding(*row) for row in rows])


def rows_page(queryset: QuerySet, *, start: int, stop: int) -> QuerySet:
    """Rows ``start`` to ``stop`` (0-based, half-open) of ``queryset`` in its
    order, in one query that picks the page's primary keys first and then
    reads only those rows with their joins. A plain OFFSET made PostgreSQL
    join every row it skipped: page 1,000 of 100,000 findings took ~110 ms
    in the database, ~6 ms this way."""
    return queryset.filter(pk__in=queryset.values("pk")[start:stop])


def findings_count_by_state_and_resolution(queryset: QuerySet[Finding]) -> tuple[dict[str, int], dict[str, int]]:
    """Over ``queryset``: open findings counted by state, and closed ones by
    resolution (a closed finding from before resolutions under ""). Two
    queries, each of which an index narrows (the open findings' partial
    index; (resolution, closed_at) alone answers the second): one count by
    state, resolution and openness read every row, 25 ms at 100,000."""
    open_counts = (queryset.filter(closed_at__isnull=True).order_by().values_list("state")
                   .annotate(count=Count("*")))
    closed_counts = (queryset.filter(closed_at__isnull=False).order_by().values_list("resolution")
                     .annotate(count=Count("*")))
    return dict(open_counts), dict(closed_counts)


def clusters_with_certificates_list(*, now: datetime, within_days: int) -> list[Cluster]:
    """``clusters_list``, each cluster with ``certificates`` (every certificate
    of its CA bundle and client chain, soonest expiry first) and
    ``certificates_expiring`` (those expiring within ``within_days``, or
    expired: role, subject, not_after, days_left)."""
    clusters = list(clusters_list())
    for cluster in clusters:
        cluster.certificates = certificate_expiries(ssl_ca_pem=cluster.ssl_ca_pem,
                                                    ssl_certificate_pem=cluster.ssl_certificate_pem)
        cluster.certificates_expiring = [
            {"role": expiry.role, "subject": expiry.subject, "not_after": expiry.not_after,
             "days_left": expiry.days_left(now)}
            for expiry in certificates_expiring(cluster.certificates, now=now, within_days=within_days)
        ]
    return clusters


def clusters_list() -> QuerySet[Cluster]:
    """Clusters by name, with ``<secret>_set`` annotated for each secret
    (``sasl_password_set``, ``ssl_key_pem_set``, ...) and the ciphertexts
    deferred, so no encrypted secret leaves the database."""
    ciphertexts = [f"{name}_encrypted" for name in Cluster.SECRETS]
    return (
        Cluster.objects.defer(*ciphertexts)
        .annotate(**{f"{name}_set": ExpressionWrapper(~Q(**{f"{name}_encrypted": ""}), output_field=BooleanField())
                     for name in Cluster.SECRETS})
        .order_by("name", "id")
    )


def clusters_freshness(*, now: datetime, poll_interval: timedelta) -> list[ClusterFreshness]:
    """How current each enabled cluster's stored state is (the page header
    and its banner), by name, in one query of a few columns."""
    rows = (Cluster.objects.filter(enabled=True).order_by("name", "id")
            .values_list("name", "status", "last_success_at", "created_at", "last_error"))
    return [
        cluster_freshness(name=name, unreachable=status == Cluster.Status.UNREACHABLE, last_success_at=success,
                          first_seen_at=created, error=error, now=now, poll_interval=poll_interval)
        for name, status, success, created, error in rows
    ]


def topics_list(
    *, cluster: Cluster | str | None = None, name: str | None = None, name_contains: str | None = None
) -> QuerySet[Topic]:
    """Topics by cluster and name, each with ``latest_generation`` (the
    highest partition generation number, None before the first one).
    ``name`` is an exact topic name, ``name_contains`` part of one, ignoring case."""
    latest = PartitionGeneration.objects.filter(topic=OuterRef("pk")).order_by("-number").values("number")[:1]
    queryset = Topic.objects.select_related("cluster").annotate(latest_generation=Subquery(latest))
    queryset = _by_name(queryset, "cluster", "name", cluster)
    if name is not None:
        queryset = queryset.filter(name=name)
    if name_contains:
        queryset = queryset.filter(name__icontains=name_contains)
    return queryset.order_by("cluster__name", "name", "id")


def groups_list(
    *, cluster: Cluster | str | None = None, group_id: str | None = None, group_id_contains: str | None = None,
    group_type: str | None = None, with_partitions: bool = False,
) -> QuerySet[ConsumerGroup]:
    """Consumer groups by cluster and group id, each with ``open_findings``
    (a count) and its ``group_topics`` prefetched with their topics, by name
    (their per-partition rows only ``with_partitions``: a group page's).
    ``group_id`` is an exact group id, ``group_id_contains`` part of one,
    ignoring case; ``group_type`` a kind (``groups.domain.group_kinds``)."""
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
            Prefetch("group_topics", queryset=GroupTopic.objects.select_related("topic").order_by("topic__name")
                     .defer(*(() if with_partitions else ("partitions",))))
        )
    )
    queryset = _by_name(queryset, "cluster", "name", cluster)
    if group_id is not None:
        queryset = queryset.filter(group_id=group_id)
    if group_id_contains:
        queryset = queryset.filter(group_id__icontains=group_id_contains)
    if group_type is not None:
        queryset = queryset.filter(group_kind_q(group_type))
    return queryset.order_by("cluster__name", "group_id", "id")
