"""Standing repair rules (issue 33, item 5; DESIGN.md section 7): repairs
approved in advance for expansions nobody announced (Terraform, Strimzi,
``kafka-topics --alter``).

An operator writes a rule: a cluster, a topic pattern and a group pattern
(the globs of team scopes, ``groups.domain.scopes.matches``), a sink and the
most records it may replay by itself. When a finding of a matching group on
a matching topic is **decided** (a gap with its bound: the group's first
commit on the new partition), the rule's backfill of the sound range is
queued by itself, verified as every backfill is, and the finding closes as
repaired. More than the maximum waits for a person.

Pure: the rules and one finding's facts in, a decision out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from groups.domain.finding_states import COVERED, GAP
from groups.domain.preapproved import repair_within_maximum
from groups.domain.scopes import matches

Decision = Literal["queue", "wait", "refuse", "none"]


@dataclass(frozen=True)
class StandingRule:
    id: int
    name: str
    topic_pattern: str
    group_pattern: str
    max_records: int

    def covers(self, *, topic: str, group: str) -> bool:
        return matches(self.topic_pattern, topic) and matches(self.group_pattern, group)


def rule_for(rules: Iterable[StandingRule], *, topic: str, group: str) -> StandingRule | None:
    """The rule that acts on (topic, group): of those covering both, the
    oldest (lowest id), so adding a rule never takes a finding from an
    existing one."""
    covering = [rule for rule in rules if rule.covers(topic=topic, group=group)]
    return min(covering, key=lambda rule: rule.id) if covering else None


@dataclass(frozen=True)
class RuleDecision:
    decision: Decision
    reason: str


def rule_decision(rule: StandingRule, *, state: str, bound_end: int | None, offsets: int,
                  records: int | None) -> RuleDecision:
    """What ``rule`` does with one open finding now:

    - ``wait``: not decided yet (pending, unowned, or no first commit: no
      bound, so the range a backfill must cover is not known), or more
      offsets than the maximum before the records were counted;
    - ``none``: nothing to repair (covered, or an empty range);
    - ``refuse``: over the rule's maximum: left for a person;
    - ``queue``: the backfill of the sound range, by itself
    (the maximum's rule: ``preapproved.repair_within_maximum``, an expansion's too).
    """
    if state == COVERED:
        return RuleDecision("none", "the group starts the new partition at its log start: nothing to repair")
    if state != GAP or bound_end is None:
        return RuleDecision("wait", "not decided yet: the group has no first commit on the new partition")
    if offsets <= 0:
        return RuleDecision("none", "the sound range is empty: nothing to repair")
    limit = repair_within_maximum(offsets=offsets, records=records, max_records=rule.max_records,
                                  maximum=f"the maximum of rule {rule.name!r} ({rule.max_records})")
    return RuleDecision(limit.decision, limit.reason)
