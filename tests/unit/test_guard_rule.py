"""The consumer-side guard's rule (``gapwatch_guard.plan.plan_topic``), case by
case: which newly assigned partitions a guard rewinds to the beginning, which
keep the group's auto.offset.reset, and which it remembers as known. Pure: the
guard on a real broker and Redis is tested in tests/integration/test_guard.py.
"""

from __future__ import annotations

import pytest
from gapwatch_guard.plan import TopicAssignment, plan_topic


def assignment(*, committed=(), uncommitted=(), known=(), committed_on_topic=(), topic_partitions=()):
    return TopicAssignment(
        topic="t", committed=frozenset(committed), uncommitted=frozenset(uncommitted), known=frozenset(known),
        committed_on_topic=frozenset(committed_on_topic), topic_partitions=frozenset(topic_partitions),
    )


RULE_CASES = [
    # (id, why, observed, rewind, default, remember, basis)
    ("all-committed", "a commit everywhere: nothing to decide, nothing new to remember",
     assignment(committed={0, 1}, known={0, 1}), set(), set(), set(), "known set"),
    ("new", "no commit and not in the known set: added since the group's generation, start at the beginning",
     assignment(committed={0}, uncommitted={2}, known={0, 1}), {2}, set(), set(), "known set"),
    ("known-uncommitted", "no commit but in the known set: the group knew it (a first-start partition never "
     "read from), so its auto.offset.reset stands",
     assignment(uncommitted={1}, known={0, 1}), set(), {1}, set(), "known set"),
    ("committed-not-in-set", "a committed partition missing from the set is known by its commit: remember it",
     assignment(committed={2}, uncommitted={3}, known={0, 1}), {3}, set(), {2}, "known set"),
    ("first-start", "no set and no commit anywhere on the topic: the group's first start, auto.offset.reset for "
     "all; every partition the topic has now is the known generation, for members assigned later",
     assignment(uncommitted={0, 1}, topic_partitions={0, 1, 2, 3}), set(), {0, 1}, {0, 1, 2, 3}, "first start"),
    ("set-lost", "no set but commits on the topic: it consumed the topic before and has no set; a partition it "
     "never committed on may be new, so it starts at the beginning (a duplicate at worst, never a loss)",
     assignment(committed={0}, uncommitted={2}, committed_on_topic={0, 1}, topic_partitions={0, 1, 2}),
     {2}, set(), {0, 1}, "no known set, group has commits"),
]


@pytest.mark.parametrize("why, observed, rewind, default, remember, basis", [case[1:] for case in RULE_CASES],
                         ids=[case[0] for case in RULE_CASES])
def test_the_rule_decides_each_case_for_its_reason(why, observed, rewind, default, remember, basis):
    plan = plan_topic(observed)
    assert (set(plan.rewind), set(plan.default), set(plan.remember), plan.basis) == (
        rewind, default, remember, basis), why


def test_the_guard_refuses_a_kafka_config_without_bootstrap_servers():
    import pytest

    from gapwatch_guard import PartitionGuard

    with pytest.raises(ValueError, match="bootstrap.servers"):
        PartitionGuard(redis_url="redis://127.0.0.1:1/0", cluster="prod", group_id="billing",
                       kafka_config={"group.id": "billing"})


def test_the_guards_own_client_gets_the_consumers_connection_settings_only():
    from gapwatch_guard.guard import connection_settings

    consumer = {"bootstrap.servers": "k:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.password": "pw", "ssl.ca.location": "/ca.pem", "client.id": "billing-1",
                "group.id": "billing", "auto.offset.reset": "latest", "enable.auto.commit": False,
                "partition.assignment.strategy": "range", "on_commit": print}
    assert connection_settings(consumer) == {
        "bootstrap.servers": "k:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.password": "pw", "ssl.ca.location": "/ca.pem", "client.id": "billing-1"}
