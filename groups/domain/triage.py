"""The home page's triage of open findings: grouped by cluster, group and
topic, with totals, the most urgent first, and one recommended repair each.

Pure: no Django, no Kafka. Offsets are "the next message to read". The
recommendation reuses the reset preview's rule
(``planning.backfill_recommended`` over what a reset to earliest would
re-deliver, from ``planning.plan_reset``), and says why in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import Literal, TypeVar

from groups.domain.finding_states import COVERED, UNTAKEN
from groups.domain.planning import PartitionPosition, ResetTarget, backfill_recommended, plan_reset

Action = Literal["backfill", "reset", "job", "none"]
# Nobody has taken these partitions: a backfill cannot cover what the group will skip when it does.
UNTAKEN_STATES = UNTAKEN
NOTHING_TO_REPAIR = COVERED
# A group whose broker state is one of these, or that has no member, accepts an offset commit.
EMPTY_GROUP_STATES = ("Empty", "Dead")


def group_is_empty(*, state: str, member_count: int) -> bool:
    """Whether the broker would accept an administrative offset commit (no
    live member), as of the last poll. The reset preview asks here too."""
    return state in EMPTY_GROUP_STATES or member_count == 0


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group as the last poll saw it. ``key`` is its row id;
    ``type`` the broker's word for its type (empty until described), which
    the pages name with ``groups.domain.group_kinds``."""

    key: int
    cluster: str
    group_id: str
    state: str
    member_count: int
    type: str = ""

    @property
    def empty(self) -> bool:
        return group_is_empty(state=self.state, member_count=self.member_count)


@dataclass(frozen=True)
class OpenFinding:
    """One open finding, as triage needs it. ``missed_definite`` and
    ``missed_possible`` are bounds from broker observations;
    ``active_job`` the id of a job working on it, or None."""

    id: int
    group_key: int
    topic: str
    partition: int
    state: str
    missed_definite: int
    missed_possible: int
    log_start: int
    high_watermark: int
    committed: int | None
    active_job: int | None = None
    # The estimate of when retention may delete its first missed record (groups.domain.urgency); None: none.
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Totals:
    """``partitions``: open findings; ``covered``: those of them with nothing to repair;
    ``soonest_expiry``: the earliest of their ``expires_at`` estimates (None: none has one)."""

    missed_definite: int
    missed_possible: int
    partitions: int
    covered: int
    soonest_expiry: datetime | None = None

    @classmethod
    def of(cls, findings: Iterable[OpenFinding]) -> Totals:
        return cls.added(cls(missed_definite=f.missed_definite, missed_possible=f.missed_possible, partitions=1,
                             covered=int(f.state == NOTHING_TO_REPAIR),
                             soonest_expiry=None if f.state == NOTHING_TO_REPAIR else f.expires_at)
                         for f in findings)

    @classmethod
    def added(cls, parts: Iterable[Totals]) -> Totals:
        parts = list(parts)
        return cls(
            missed_definite=sum(p.missed_definite for p in parts),
            missed_possible=sum(p.missed_possible for p in parts),
            partitions=sum(p.partitions for p in parts),
            covered=sum(p.covered for p in parts),
            soonest_expiry=min((p.soonest_expiry for p in parts if p.soonest_expiry is not None), default=None),
        )


@dataclass(frozen=True)
class Recommendation:
    """What to do about some findings of one group: ``action`` "backfill" or
    "reset" (of ``finding_ids``, the findings it should cover), "job" (jobs
    are already working on all of them: ``jobs``), or "none" (every one is
    covered); ``reason`` says why, with the numbers it used."""

    action: Action
    reason: str
    finding_ids: tuple[int, ...] = ()
    jobs: tuple[int, ...] = ()
    redelivered: int = 0
    missed_at_most: int = 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _reset_redelivered(findings: list[OpenFinding]) -> int:
    """Records a reset to earliest would make the group read again (the reset preview's default target)."""
    positions = [PartitionPosition(topic=f.topic, partition=f.partition, log_start=f.log_start,
                                   high_watermark=f.high_watermark, committed=f.committed) for f in findings]
    return sum(p.redelivered for p in plan_reset(target=ResetTarget("earliest"), positions=positions))


def recommend(*, group: GroupInfo, findings: Iterable[OpenFinding]) -> Recommendation:
    """The repair to suggest for ``findings`` (of ``group``), first rule that applies:

    1. every finding covered: nothing to repair;
    2. the rest all have an active job: that job;
    3. a partition nobody has taken yet: a reset (a backfill cannot cover what
       the group will skip when it takes it; the job waits for an empty group);
    4. a reset to earliest would re-deliver far more than was missed
       (``planning.backfill_recommended``): a backfill;
    5. the group is empty: a reset (no Spark job, few duplicates);
    6. the group has live members: a backfill (a reset would wait until they stop).
    """
    findings = sorted(findings, key=lambda f: (f.topic, f.partition, f.id))
    repairable = [f for f in findings if f.state != NOTHING_TO_REPAIR]
    if not repairable:
        return Recommendation("none", "covered: the group read the new partition from its start; nothing to repair")
    idle = [f for f in repairable if f.active_job is None]
    if not idle:
        jobs = tuple(sorted({f.active_job for f in repairable}))
        return Recommendation("job", f"{'jobs' if len(jobs) > 1 else 'a job'} already working on "
                              f"{'them' if len(repairable) > 1 else 'it'}", jobs=jobs)
    ids = tuple(f.id for f in idle)
    redelivered = _reset_redelivered(idle)
    missed_at_most = sum(f.missed_definite + f.missed_possible for f in idle)
    numbers = {"finding_ids": ids, "redelivered": redelivered, "missed_at_most": missed_at_most}
    untaken = [f for f in idle if f.state in UNTAKEN_STATES]
    if untaken:
        when = "now, while the group is empty" if group.empty else "(the job waits until the group is empty)"
        return Recommendation("reset", f"nobody has taken {_plural(len(untaken), 'new partition')} yet: reset to "
                              f"earliest {when}; a backfill cannot cover what the group skips later", **numbers)
    if backfill_recommended(redelivered=redelivered, missed_at_most=missed_at_most):
        return Recommendation("backfill", f"a reset would re-deliver {redelivered} offsets to recover at most "
                              f"{missed_at_most}: replay only the missed ranges", **numbers)
    if group.empty:
        return Recommendation("reset", f"the group is empty: a reset to earliest recovers at most {missed_at_most} "
                              f"and re-delivers {redelivered}, no Spark job needed", **numbers)
    return Recommendation("backfill", f"the group has {_plural(group.member_count, 'live member')}: a reset "
                          "would wait until they stop; a backfill does not disturb them", **numbers)


# Recommendations are worked out when first read, not when triaged: the order
# does not depend on them, and a page shows 50 of perhaps a thousand groups
# (planning a reset for each took most of the home page's time).


@dataclass(frozen=True)
class TopicTriage:
    topic: str
    totals: Totals
    findings: tuple[OpenFinding, ...]
    group: GroupInfo

    @cached_property
    def recommendation(self) -> Recommendation:
        return recommend(group=self.group, findings=self.findings)


@dataclass(frozen=True)
class GroupTriage:
    """``rank``: 0 live members and a definite loss, 1 a definite loss, 2 a
    possible loss or partitions still at risk, 3 nothing to repair (covered)."""

    group: GroupInfo
    totals: Totals
    topics: tuple[TopicTriage, ...]
    rank: int

    @property
    def live(self) -> bool:
        return not self.group.empty

    @cached_property
    def recommendation(self) -> Recommendation:
        return recommend(group=self.group, findings=[f for topic in self.topics for f in topic.findings])


@dataclass(frozen=True)
class ClusterTriage:
    cluster: str
    totals: Totals
    groups: tuple[GroupTriage, ...]


@dataclass(frozen=True)
class GroupOutline:
    """A group's place in the triage, known from its totals alone (before
    its findings are read); ``rank`` as in ``GroupTriage``."""

    group: GroupInfo
    totals: Totals
    rank: int


@dataclass(frozen=True)
class ClusterOutline:
    """A cluster's groups in triage order, with its totals over all of them."""

    cluster: str
    totals: Totals
    groups: tuple[GroupOutline, ...]


def _rank(group: GroupInfo, totals: Totals) -> int:
    if totals.covered == totals.partitions:
        return 3
    if totals.missed_definite > 0:
        return 0 if not group.empty else 1
    return 2


def _loss_first(totals: Totals) -> tuple[int, int]:
    return (-totals.missed_definite, -totals.missed_possible)


def _expiry_first(totals: Totals) -> tuple[bool, datetime | None]:
    return (totals.soonest_expiry is None, totals.soonest_expiry)


def triage_outline(*, totals: Mapping[int, Totals], groups: Mapping[int, GroupInfo],
                   by_expiry: bool = False) -> tuple[ClusterOutline, ...]:
    """The triage's order, from each group's totals over its open findings
    (``totals``, by group key; every key must be in ``groups``).

    Groups: by rank (``GroupTriage.rank``: live members with a definite loss
    first), then most definitely missed, most possibly missed, group id.
    Clusters: by their most urgent group, then name. ``by_expiry``: groups
    whose first missed record retention may delete soonest first (those
    without an estimate last), then as above; clusters by their first group's."""
    by_cluster: dict[str, list[GroupOutline]] = {}
    for key, group_totals in totals.items():
        group = groups[key]
        by_cluster.setdefault(group.cluster, []).append(GroupOutline(group, group_totals, _rank(group, group_totals)))
    clusters = []
    for cluster, items in by_cluster.items():
        items.sort(key=lambda g: (*(_expiry_first(g.totals) if by_expiry else ()), g.rank, *_loss_first(g.totals),
                                  g.group.group_id, g.group.key))
        clusters.append(ClusterOutline(cluster, Totals.added(g.totals for g in items), tuple(items)))
    if by_expiry:
        return tuple(sorted(clusters, key=lambda c: (*_expiry_first(c.groups[0].totals), c.groups[0].rank, c.cluster)))
    return tuple(sorted(clusters, key=lambda c: (c.groups[0].rank, c.cluster)))


def triage_fill(outline: tuple[ClusterOutline, ...], *, findings: Iterable[OpenFinding]) -> tuple[ClusterTriage, ...]:
    """The outline's groups with their topics: ``findings`` are the open
    findings of (at least) those groups. Topics: most missed first, then
    name. A group none of ``findings`` belongs to (its findings closed since
    the outline was made) is left out; each cluster keeps the outline's totals."""
    by_group: dict[int, list[OpenFinding]] = {}
    for finding in findings:
        by_group.setdefault(finding.group_key, []).append(finding)
    clusters = []
    for cluster in outline:
        filled = tuple(_group_triage(item, by_group[item.group.key])
                       for item in cluster.groups if item.group.key in by_group)
        if filled:
            clusters.append(ClusterTriage(cluster.cluster, cluster.totals, filled))
    return tuple(clusters)


def _group_triage(outline: GroupOutline, findings: list[OpenFinding]) -> GroupTriage:
    by_topic: dict[str, list[OpenFinding]] = {}
    for finding in sorted(findings, key=lambda f: (f.partition, f.id)):
        by_topic.setdefault(finding.topic, []).append(finding)
    topics = sorted(
        (TopicTriage(topic, Totals.of(items), tuple(items), outline.group) for topic, items in by_topic.items()),
        key=lambda t: (*_loss_first(t.totals), t.topic),
    )
    return GroupTriage(outline.group, outline.totals, tuple(topics), outline.rank)


def triage(*, findings: Iterable[OpenFinding], groups: dict[int, GroupInfo]) -> tuple[ClusterTriage, ...]:
    """Open findings by cluster, group and topic, most urgent first: the
    outline (``triage_outline``) of their totals, filled with them. Every
    finding's group must be in ``groups``."""
    findings = list(findings)
    by_group: dict[int, list[OpenFinding]] = {}
    for finding in findings:
        by_group.setdefault(finding.group_key, []).append(finding)
    outline = triage_outline(totals={key: Totals.of(items) for key, items in by_group.items()}, groups=groups)
    return triage_fill(outline, findings=findings)


Clusters = TypeVar("Clusters", ClusterTriage, ClusterOutline)


def triage_slice(clusters: tuple[Clusters, ...], *, start: int, stop: int) -> tuple[Clusters, ...]:
    """Groups ``start`` to ``stop`` (0-based, half-open) of the triage (or
    its outline) in its order, each cluster keeping its totals over all its
    groups: one page of a long triage."""
    shown, seen = [], 0
    for cluster in clusters:
        first, last = max(start - seen, 0), min(stop - seen, len(cluster.groups))
        if first < last:
            shown.append(replace(cluster, groups=cluster.groups[first:last]))
        seen += len(cluster.groups)
    return tuple(shown)
