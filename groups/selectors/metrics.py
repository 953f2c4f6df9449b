"""What the /metrics endpoint exports, each read in one query."""

from __future__ import annotations

from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, OuterRef, Q, Sum
from django.db.models.functions import Coalesce

from groups.domain.group_kinds import group_kind
from groups.models import Finding, GroupTopic, RemediationJob

# States in which a finding reports messages the group missed (undecided: its
# definite part; it has no upper bound yet).
MISSED_STATES = (Finding.State.GAP, Finding.State.EXPIRED, Finding.State.UNDECIDED)


def findings_open_lag_list() -> list[dict]:
    """Lag on the partitions with an open finding, summed per (cluster, group,
    topic, state) in the database: one row per group's topic and state, not
    per partition, so a scrape stays small however many findings are open.
    A partition with open findings in several generations counts once, with
    its newest generation's finding (state and lag).

    Rows: ``cluster``, ``group``, ``group_type`` (the group's kind,
    ``groups.domain.group_kinds``), ``topic``, ``state``, ``lag``.
    """
    newer = Finding.objects.filter(
        closed_at__isnull=True, cluster=OuterRef("cluster"), group=OuterRef("group"), topic=OuterRef("topic"),
        partition=OuterRef("partition"), generation__number__gt=OuterRef("generation__number"),
    )
    rows = (
        Finding.objects.filter(closed_at__isnull=True)
        .exclude(Exists(newer))
        .order_by()
        .values_list("cluster__name", "group__group_id", "group__type", "topic__name", "state")
        .annotate(lag=Sum("lag"))
    )
    return [{"cluster": cluster, "group": group, "group_type": group_kind(type_, group), "topic": topic,
             "state": state, "lag": lag}
            for cluster, group, type_, topic, state, lag in rows]


def findings_summary_by_cluster() -> dict[str, dict]:
    """Per cluster name, from one query over all findings:

    - ``open``: open findings counted by state;
    - ``missed``: (definite, possible) missed messages summed over open
      findings in the states that report them (gap, expired);
    - ``if_latest``: (definite, possible) under an assumed latest, the
      conditional figures, summed over the same findings;
    - ``resolved``: closed findings counted by resolution;
    - ``recovered``: per job kind, (recovered, redelivered) messages summed
      over repaired findings.
    Absent keys mean none."""
    rows = (
        Finding.objects.order_by()
        .annotate(is_open=ExpressionWrapper(Q(closed_at__isnull=True), output_field=BooleanField()))
        .values_list("cluster__name", "is_open", "state", "resolution", "resolved_by_job__kind")
        .annotate(count=Count("id"), definite=Sum("missed_definite"), possible=Sum("missed_possible"),
                  definite_if_latest=Coalesce(Sum("missed_definite_if_latest"), 0),
                  possible_if_latest=Coalesce(Sum("missed_possible_if_latest"), 0),
                  recovered=Coalesce(Sum("recovered_messages"), 0), redelivered=Coalesce(Sum("redelivered_messages"), 0))
    )
    summary: dict[str, dict] = {}
    for (cluster, is_open, state, resolution, kind, count, definite, possible, definite_if_latest, possible_if_latest,
         recovered, redelivered) in rows:
        entry = summary.setdefault(cluster, {"open": {}, "missed": (0, 0), "if_latest": (0, 0), "resolved": {},
                                             "recovered": {}})
        if is_open:
            entry["open"][state] = entry["open"].get(state, 0) + count
            if state in MISSED_STATES:
                entry["missed"] = (entry["missed"][0] + definite, entry["missed"][1] + possible)
                entry["if_latest"] = (entry["if_latest"][0] + definite_if_latest,
                                      entry["if_latest"][1] + possible_if_latest)
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
    exists. Rows: ``cluster``, ``group``, ``group_type`` (its kind), ``topic``, ``lag``."""
    rows = (
        GroupTopic.objects.filter(group__present=True, topic__deleted=False)
        .order_by("group__cluster__name", "group__group_id", "topic__name")
        .values_list("group__cluster__name", "group__group_id", "group__type", "topic__name", "lag")
    )
    return [{"cluster": cluster, "group": group, "group_type": group_kind(type_, group), "topic": topic, "lag": lag}
            for cluster, group, type_, topic, lag in rows]


# The verdict labels of gapwatch_expansion_groups: nothing_lost, loss, or not_decided (a failed job's groups).
EXPANSION_VERDICTS = ("nothing_lost", "loss", "not_decided")


# How each group judged nothing lost got there (gapwatch_expansion_group_outcomes): protected by
# Gapwatch, covered by itself, copied to its sink (its application did not read it); lost; not_decided.
EXPANSION_HOWS = ("protected", "covered", "copied", "lost", "not_decided")


def expansion_verdicts_by_cluster() -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """Groups judged by finished expansion jobs, counted by (cluster name, verdict) and by (cluster
    name, how), in one query: protection and copy told apart (a verdict from before the distinction
    counts by its words)."""
    from groups.models import ExpansionJob

    verdicts_count: dict[tuple[str, str], int] = {}
    hows: dict[tuple[str, str], int] = {}
    for cluster, verdicts in ExpansionJob.objects.filter(finished_at__isnull=False).values_list(
            "cluster__name", "verdicts"):
        for verdict in (verdicts or {}).values():
            nothing_lost = verdict.get("nothing_lost")
            label = "not_decided" if nothing_lost is None else "nothing_lost" if nothing_lost else "loss"
            verdicts_count[cluster, label] = verdicts_count.get((cluster, label), 0) + 1
            how = verdict.get("how")
            if nothing_lost is None:
                how = "not_decided"
            elif how not in EXPANSION_HOWS:
                how = "lost" if not nothing_lost else "copied" if "backfill" in str(verdict.get("words")) else "covered"
            hows[cluster, how] = hows.get((cluster, how), 0) + 1
    return verdicts_count, hows