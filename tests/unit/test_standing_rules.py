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


NOT_DECIDED = "not decided yet: the group has no first commit on the new partition"
MAXIMUM = "the maximum of rule 'orders' (1000)"


@pytest.mark.parametrize("state, bound_end, offsets, records, decision, reason", [
    # Not decided: no bound, so the range to replay is not known yet.
    ("pending", None, 0, None, "wait", NOT_DECIDED),
    ("unowned", None, 0, None, "wait", NOT_DECIDED),
    ("undecided", None, 40, None, "wait", NOT_DECIDED),
    ("gap", None, 40, None, "wait", NOT_DECIDED),  # a gap without its first commit
    # Nothing to repair.
    ("covered", 40, 40, None, "none", "the group starts the new partition at its log start: nothing to repair"),
    ("gap", 0, 0, None, "none", "the sound range is empty: nothing to repair"),
    # Within the maximum: queued, by records once counted, else by offsets (never fewer than records).
    ("gap", 1, 1, None, "queue", f"1 offsets (so at most as many records) within {MAXIMUM}"),
    ("gap", 40, 40, None, "queue", f"40 offsets (so at most as many records) within {MAXIMUM}"),
    ("gap", 1000, 1000, None, "queue", f"1000 offsets (so at most as many records) within {MAXIMUM}"),  # the maximum
    ("gap", 5000, 5000, 1000, "queue", f"1000 records within {MAXIMUM}"),  # markers took offsets: the records fit
    # Past the maximum.
    ("gap", 1001, 1001, None, "wait", f"1001 offsets exceed {MAXIMUM}: waiting for the record count"),
    ("gap", 1001, 1001, 1001, "refuse", f"1001 records exceed {MAXIMUM}: left for a person to approve"),
])
def test_what_a_rule_does_with_a_finding(state, bound_end, offsets, records, decision, reason):
    result = rule_decision(ORDERS, state=state, bound_end=bound_end, offsets=offsets, records=records)
    assert (result.decision, result.reason) == (decision, reason)
