"""Findings on partitions Gapwatch protected by membership (issue 43): the
detection core decides them from Gapwatch's own commit as a member, a fact
from the broker, and never takes that commit for the group's. Table-driven
stories on orders partition 2 (tests/unit/core_stories.py); each says why
its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.detection import Protection
from tests.unit.core_stories import NEW_PARTITION, Step, billing_store, orders, poll

WON = Protection(offset=0, won=True, words="Gapwatch committed 0 while no member held it")
LOST = Protection(offset=0, won=False, words="a member held it already")
WON_LATE = Protection(offset=30, won=True, words="committed 30, the log start then")


def run(steps, protection, *, policy="unknown"):
    store = billing_store(policy=policy)
    if protection is not None:
        store.protections[("billing", "orders", 2)] = protection
    store.apply(poll(orders(2), groups=()))  # partitions 0 and 1 known
    changes = None
    evidence = []
    for step in steps:
        changes = store.apply(step.snapshot(store.now))
        evidence.extend(changes.policy_evidence)
    (accounting,) = [a for a in changes.accounting if a.key == NEW_PARTITION]
    return accounting, evidence, store


# (steps on partition 2, protection, declared policy, state, policy source, first commit, definite, possible, why)
CASES = [
    pytest.param(
        [Step(0, 0, commit=0), Step(0, 120, owned=True, commit=150)], WON, "unknown",
        "covered", "protected", 0, 0, 0,
        "won: whoever takes p looks its committed offset up before auto.offset.reset, so the group started at 0; "
        "its later commit 150 says nothing against that",
        id="won",
    ),
    pytest.param(
        [Step(0, 50), Step(0, 60, commit=0), Step(0, 200, owned=True, commit=180)], WON, "latest",
        "covered", "protected", 0, 0, 0,
        "won for a group declared latest: the commit decides, whatever the policy; H_k 50 was seen before it",
        id="won-declared-latest",
    ),
    pytest.param(
        [Step(0, 50), Step(0, 80, owned=True, commit=0), Step(0, 200, owned=True, commit=180)], LOST, "latest",
        "gap", "declared", 180, 50, 130,
        "lost: a member held p before the commit; Gapwatch's commit (0) is not the group's first, 180 is: "
        "[0, 50) definitely and [50, 180) possibly missed under the declared latest",
        id="lost-declared-latest",
    ),
    pytest.param(
        [Step(0, 50), Step(0, 80, owned=True, commit=0)], LOST, "latest",
        "undecided", "declared", None, 50, 0,
        "lost, and only Gapwatch's commit seen: the group has not committed yet, so no upper bound",
        id="lost-only-our-commit",
    ),
    pytest.param(
        [Step(0, 50), Step(0, 80, owned=True, commit=0)], None, "latest",
        "covered", "evidenced", 0, 0, 0,
        "the control: without the protection's record, a commit at 0 below H_k reads as the group's own start "
        "below latest (evidence of earliest) -- which is why the record matters",
        id="control-no-record",
    ),
    pytest.param(
        [Step(0, 40, commit=30), Step(0, 90, owned=True, commit=60)], WON_LATE, "unknown",
        "gap", "protected", 30, 30, 0,
        "won, but committed at 30 above the first log start 0 (a re-run after a crash reads the log start then): "
        "[0, 30) is missed, definitely",
        id="won-above-first-log-start",
    ),
]


@pytest.mark.parametrize(("steps", "protection", "policy", "state", "source", "first_commit", "definite",
                          "possible", "why"), CASES)
def test_protected_findings(steps, protection, policy, state, source, first_commit, definite, possible, why):
    accounting, _, _ = run(steps, protection, policy=policy)
    assert (accounting.state, accounting.policy_source) == (state, source), why
    assert accounting.first_commit == first_commit, why
    assert (accounting.missed_definite, accounting.missed_possible) == (definite, possible), why


def test_a_won_protection_says_so_and_proves_nothing_of_the_policy():
    accounting, evidence, store = run([Step(0, 50), Step(0, 60, commit=0), Step(0, 200, owned=True, commit=180)],
                                      WON)
    assert accounting.explanation.startswith("protected: Gapwatch committed 0 while no member held it")
    assert evidence == [] and store.groups["billing"].evidenced_policy == "unknown"


def test_a_lost_protection_lets_the_groups_own_start_prove_its_policy():
    # A member held p (so Gapwatch's commit was too late); the group's own first commit, 20, is below
    # the end 50 seen before it took p: it started below latest, which its own commit proves.
    _, evidence, _ = run([Step(0, 50), Step(0, 80, owned=True, commit=0), Step(0, 90, owned=True, commit=20)], LOST)
    assert [(e.group_id, e.policy) for e in evidence] == [("billing", "earliest")]


# (steps on partition 2, protection, exact explanation, backfill range, why)
WORDS_CASES = [
    pytest.param(
        [Step(0, 0, commit=0), Step(0, 120, owned=True, commit=150)], Protection(offset=0, won=True),
        "protected by Gapwatch's commit; nothing missed", (None, None),
        "a protection stored without words still says what decided the finding", id="won-without-words",
    ),
    pytest.param(
        [Step(10, 40, commit=30), Step(10, 90, owned=True, commit=60)], WON_LATE,
        "protected: committed 30, the log start then, above the first log start 10: [10, 30) missed", (10, 30),
        "won at 30 while the finding's first log start was 10: [10, 30) is missed and is what a backfill replays",
        id="won-above-a-log-start-not-zero",
    ),
]


@pytest.mark.parametrize(("steps", "protection", "explanation", "backfill", "why"), WORDS_CASES)
def test_a_protected_findings_words_and_repair(steps, protection, explanation, backfill, why):
    accounting, _, _ = run(steps, protection)
    assert accounting.explanation == explanation, why
    assert (accounting.backfill_start, accounting.backfill_end) == backfill, why
    assert accounting.missed_definite == (backfill[1] - backfill[0] if backfill[0] is not None else 0), why
