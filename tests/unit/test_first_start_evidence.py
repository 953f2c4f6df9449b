"""A group's first start on a topic as evidence of its policy
(``detection.first_start_evidence``, DESIGN section 3): a commit below the
floor a complete poll read before the group existed proves it did not start
at latest; everything that would make the floor no bound proves nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from groups.domain.detection import KnownGroup, KnownTopic, evaluate_snapshot, first_start_evidence
from groups.domain.snapshot import GroupSnapshot
from tests.unit.core_stories import ORDERS_ID, T0, group, orders, poll

SAMPLED = T0 - timedelta(minutes=5)
# orders' floors: partition 0 at 700, partition 1 at 900 (high watermarks are 1000 now).
STORED = KnownTopic(name="orders", topic_id=ORDERS_ID, generation=1, partition_ids=frozenset({0, 1}),
                    floors={0: 700, 1: 900}, floors_at=SAMPLED)


def reader(*, commits: dict[int, int], owns=(0, 1), group_id="fresh", kind="classic") -> GroupSnapshot:
    built = group(group_id, owns=tuple(("orders", p) for p in owns),
                  commits={("orders", p): offset for p, offset in commits.items()})
    return replace(built, type=kind)


def evidence(group_snapshot: GroupSnapshot, *, stored: KnownTopic | None = STORED, known: KnownGroup | None = None,
             topic=None):
    snapshot = poll(topic or orders(2), groups=(group_snapshot,))
    return first_start_evidence(
        snapshot=snapshot, known_topics={"orders": stored} if stored else {},
        known_groups={known.group_id: known} if known else {},
    )


def known(**fields) -> KnownGroup:
    return KnownGroup(group_id="fresh", consumed_topics=frozenset(), **fields)


@pytest.mark.parametrize("case, commits, expected", [
    ("below the floor on one partition", {0: 699, 1: 950}, "earliest"),
    ("at the log start", {0: 0, 1: 0}, "earliest"),
    ("exactly at the floor: a latest start", {0: 700, 1: 900}, None),
    ("above the floor: caught up, proves nothing", {0: 1000, 1: 1000}, None),
    ("below on the second partition only", {0: 700, 1: 899}, "earliest"),
])
def test_a_new_group_s_commits_against_the_floors(case, commits, expected):
    found = evidence(reader(commits=commits))
    assert (found["fresh"].policy if "fresh" in found else None) == expected, case


def test_the_evidence_names_the_partition_the_offsets_and_when_the_floors_were_read():
    [proof] = evidence(reader(commits={0: 1000, 1: 12})).values()
    assert proof.group_id == "fresh"
    assert "on orders" in proof.words and "12 on partition 1, below 900" in proof.words
    assert "2025-03-01 11:55:00 UTC" in proof.words and "did not start at latest" in proof.words


@pytest.mark.parametrize("case, kwargs", [
    ("a group listed at or before the sampling poll may have started before it",
     {"known": known(first_seen_at=SAMPLED)}),
    ("no floors stored for the topic", {"stored": replace(STORED, floors={}, floors_at=None)}),
    ("floors without their time", {"stored": replace(STORED, floors_at=None)}),
    ("the topic was recreated since: other offsets", {"stored": replace(STORED, topic_id="orders-id-0")}),
    ("no stored topic", {"stored": None}),
    ("already evidenced earliest", {"known": known(first_seen_at=T0, evidenced_policy="earliest")}),
])
def test_what_proves_nothing(case, kwargs):
    assert evidence(reader(commits={0: 5, 1: 5}), **kwargs) == {}, case


def test_a_group_first_listed_after_the_sampling_poll_still_counts():
    found = evidence(reader(commits={0: 5}), known=known(first_seen_at=SAMPLED + timedelta(seconds=1)))
    assert found["fresh"].policy == "earliest"


def test_a_group_evidenced_latest_is_proven_otherwise():
    found = evidence(reader(commits={0: 5}), known=known(first_seen_at=T0, evidenced_policy="latest"))
    assert found["fresh"].policy == "earliest"


def test_commits_without_a_member_holding_the_topic_are_a_tool_s_or_a_self_assigning_client_s():
    assert evidence(reader(commits={0: 5, 1: 5}, owns=())) == {}


def test_a_member_holding_another_partition_of_the_topic_is_enough():
    assert evidence(reader(commits={0: 5}, owns=(1,)))["fresh"].policy == "earliest"


def test_share_groups_state_their_rule():
    assert evidence(reader(commits={0: 5, 1: 5}, kind="share")) == {}


def test_a_partition_without_a_floor_proves_nothing():
    # Partition 2 was added after the floors were read.
    assert evidence(reader(commits={2: 5}, owns=(2,)), topic=orders(3)) == {}


def test_evaluate_snapshot_reports_it_and_accounts_the_group_s_findings_under_it():
    changes = evaluate_snapshot(snapshot=poll(orders(2), groups=(reader(commits={0: 10, 1: 1000}),)),
                                known_topics=[STORED], known_groups=[], open_findings=[], now=T0)
    [proof] = changes.policy_evidence
    assert (proof.group_id, proof.policy) == ("fresh", "earliest")

