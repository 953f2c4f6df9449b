"""What the standing protection (issue 43, item 4) reads: the live groups
that an enabled ``protect`` rule covers, each with the topics it reads that
the rule's topic pattern matches."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from groups.domain.membership import is_protector, seat_problem
from groups.domain.standing_rules import StandingRule
from groups.models import GroupTopic, RepairRule


@dataclass(frozen=True)
class ProtectTarget:
    """A live group to keep a seat in: ``topics`` the ones it reads that a
    protect rule covers (``rule_id`` the oldest such rule), its protocol and
    agreed assignor, and why no seat can be taken ("" when one can)."""

    group_id: str
    protocol: str
    assignor: str
    topics: frozenset[str]
    rule_id: int
    problem: str = ""


def protect_targets(*, cluster_id: int) -> list[ProtectTarget]:
    """Every group the cluster's enabled protect rules cover that has members
    of its own (Gapwatch's seats do not count: a group only they remain in is
    empty, and must be left so, for an administrative reset to be possible)."""
    rules = list(RepairRule.objects.filter(cluster_id=cluster_id, enabled=True, action=RepairRule.Action.PROTECT)
                 .order_by("id"))
    if not rules:
        return []
    rows = (GroupTopic.objects.filter(group__cluster_id=cluster_id, group__present=True, topic__deleted=False,
                                      group__type__in=("classic", "consumer"))
            .select_related("group", "topic").order_by("group__group_id", "topic__name"))
    found: dict[str, dict] = {}
    for row in rows:
        group, topic = row.group, row.topic.name
        rule = next((r for r in rules if StandingRule(id=r.id, name=r.name, topic_pattern=r.topic_pattern,
                                                      group_pattern=r.group_pattern, max_records=r.max_records)
                     .covers(topic=topic, group=group.group_id)), None)
        if rule is None or not any(not is_protector(m.get("client_id", "")) for m in group.members or []):
            continue
        entry = found.setdefault(group.group_id, {"group": group, "topics": set(), "rule": rule.id})
        entry["topics"].add(topic)
    return [ProtectTarget(group_id=group_id, protocol=e["group"].type, assignor=e["group"].assignor,
                          topics=frozenset(e["topics"]), rule_id=e["rule"],
                          problem=seat_problem(protocol=e["group"].type, assignor=e["group"].assignor))
            for group_id, e in sorted(found.items())]



def rules_listed() -> QuerySet[RepairRule]:
    """Every standing rule, oldest first, with its cluster."""
    return RepairRule.objects.select_related("cluster").order_by("id")


def rule_with_id(*, rule_id: int) -> RepairRule | None:
    return RepairRule.objects.select_related("cluster").filter(id=rule_id).first()


def rule_named(*, cluster_id: int, name: str, other_than: int | None = None) -> RepairRule | None:
    """The cluster's rule called ``name`` (other than rule ``other_than``), if any: names are unique per cluster."""
    return RepairRule.objects.filter(cluster_id=cluster_id, name=name).exclude(id=other_than).first()


def protect_cluster_ids() -> list[int]:
    """The clusters with an enabled protect rule."""
    return sorted(set(RepairRule.objects.filter(enabled=True, action=RepairRule.Action.PROTECT)
                      .values_list("cluster_id", flat=True)))
