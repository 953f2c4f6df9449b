"""Standing repair rules, the pure rule (groups.domain.standing_rules): which
rule acts on a finding, and what it does with it. Each case says why."""

from __future__ import annotations

import pytest

from groups.domain.standing_rules import StandingRule, rule_decision, rule_for

ORDERS = StandingRule(id=2, name="orders", topic_pattern="orders.*", group_pattern="*", max_records=1000)
BILLING = StandingRule(id=5, name="billing", topic_pattern="*", group_pattern="billing-*", max_records=50)
SCRIPT = StandingRule(id=9, name="odd", topic_pattern="x", group_pattern="<script>*", max_records=1)


@pytest.mark.parametrize("topic, group, expected", [
    ("orders.eu", "shipping", ORDERS),  # the topic matches, any group
    ("orders.eu", "billing-api", ORDERS),  # both cover it: the oldest rule acts
    ("payments", "billing-api", BILLING),  # only the group pattern's rule
    ("payments", "shipping", None),  # neither covers it
    ("orders", "shipping", None),  # "orders.*" needs the dot: the whole name must match
    ("Orders.eu", "shipping", None),  # case matters (Kafka names are case-sensitive)
    ("payments", "old-billing-api", None),  # a pattern is matched on the whole id
    ("x", "<script>alert(1)", SCRIPT),  # hostile ids are just names
])
def test_the_oldest_rule_covering_topic_and_group_acts(topic, group, expected):
    assert rule_for([BILLING, SCRIPT, ORDERS], topic=topic, group=group) == expected


def test_no_rules_none_acts():
    assert rule_for([], topic="orders.eu", group="g") is None


@pytest.mark.parametrize("state, bound_end, offsets, records, decision, words", [
    # Not decided: no bound, so the range to replay is not known yet.
    ("pending", None, 0, None, "wait", "not decided yet"),
    ("unowned", None, 0, None, "wait", "not decided yet"),
    ("undecided", None, 40, None, "wait", "not decided yet"),
    ("gap", None, 40, None, "wait", "not decided yet"),  # a gap without its first commit
    # Nothing to repair.
    ("covered", 40, 40, None, "none", "nothing to repair"),
    ("gap", 0, 0, None, "none", "range is empty"),
    # Within the maximum: queued, by records once counted, else by offsets (never fewer than records).
    ("gap", 40, 40, None, "queue", "40 offsets (so at most as many records) within the maximum of rule 'orders' (1000)"),
    ("gap", 1000, 1000, None, "queue", "1000 offsets"),  # the maximum itself is allowed
    ("gap", 5000, 5000, 1000, "queue", "1000 records within"),  # markers took offsets: the records fit
    # Past the maximum.
    ("gap", 1001, 1001, None, "wait", "waiting for the record count"),  # the count may still fit
    ("gap", 1001, 1001, 1001, "refuse", "1001 records exceed the maximum of rule 'orders' (1000): left for a person"),
])
def test_what_a_rule_does_with_a_finding(state, bound_end, offsets, records, decision, words):
    result = rule_decision(ORDERS, state=state, bound_end=bound_end, offsets=offsets, records=records)
    assert result.decision == decision
    assert words in result.reason
