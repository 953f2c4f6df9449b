"""Table-driven tests of the pure core: each case says why its answer is right.

The stories run on topic ``orders`` and group ``billing``, in the world
tests/unit/core_stories.py builds (its docstring tells the story).
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, replace

import pytest

from groups.domain.detection import (
    Changes,
    FindingKey,
    KnownGroup,
    KnownTopic,
    LikelyStart,
    StateTransition,
    partition_lag,
)
from groups.domain.snapshot import Snapshot
from tests.unit.core_stories import (
    GROUPS_FROM,
    NEW_PARTITION,
    OBSERVED_UNTIL,
    ORDERS_ID,
    POLL_INTERVAL,
    T0,
    Step,
    Store,
    billing_reading,
    billing_store,
    group,
    key,
    orders,
    poll,
    topic,
)

# --- Generations and which findings open ------------------------------------


@dataclass(frozen=True)
class PollExpectation:
    generations: tuple[tuple, ...] = ()  # (topic, generation, added, removed, is_new_lineage)
    new_findings: tuple[FindingKey, ...] = ()
    deleted_topics: tuple[str, ...] = ()
    closed_findings: tuple[FindingKey, ...] = ()


CONSUMER_OFFSETS = KnownTopic("__consumer_offsets", "co-id", 1, frozenset(range(3)))
PAYMENTS = KnownTopic("payments", "payments-id-1", 4, frozenset({0}))

GENERATION_CASES = [
    pytest.param(
        billing_store(),
        [poll(orders(2), groups=(billing_reading(0, 1),))],
        [PollExpectation()],
        "same topic id and partition set: no new generation, nothing to find",
        id="unchanged-topic",
    ),
    pytest.param(
        billing_store(),
        [poll(orders(4), groups=(billing_reading(0, 1),)), poll(orders(6), groups=(billing_reading(0, 1, 2, 3),))],
        [
            PollExpectation(
                generations=(("orders", 2, {2, 3}, set(), False),), new_findings=(key(2, 2), key(3, 2))
            ),
            PollExpectation(
                generations=(("orders", 3, {4, 5}, set(), False),), new_findings=(key(4, 3), key(5, 3))
            ),
        ],
        "2->4 then 4->6: each growth is its own generation (2, then 3), and billing, which read orders "
        "before each poll, gets one finding per added partition of that generation",
        id="two-increases-in-a-row",
    ),
    pytest.param(
        billing_store(),
        [
            poll(orders(3), groups=(billing_reading(0, 1),)),
            poll(orders(4, topic_id="orders-id-2"), groups=(billing_reading(0, 1),)),
        ],
        [
            PollExpectation(generations=(("orders", 2, {2}, set(), False),), new_findings=(key(2, 2),)),
            PollExpectation(
                generations=(("orders", 3, {0, 1, 2, 3}, set(), True),), closed_findings=(key(2, 2),)
            ),
        ],
        "a new topic id under the same name is a deleted-and-recreated topic: a new lineage (numbering "
        "continues at 3), no findings, and the old lineage's open finding is closed: its offsets are gone",
        id="topic-recreated-same-name",
    ),
    pytest.param(
        billing_store(),
        [poll(orders(3), groups=(billing_reading(0, 1),
                                 group("audit", owns=(("orders", 0), ("orders", 1), ("orders", 2)))))],
        [PollExpectation(generations=(("orders", 2, {2}, set(), False),), new_findings=(key(2, 2),))],
        "audit is brand new, without a commit, and its member already owns the added partition: it joined "
        "knowing three partitions, so it cannot have missed the third",
        id="brand-new-group-that-knows-the-new-count",
    ),
    pytest.param(
        billing_store(),
        [poll(orders(3), groups=(billing_reading(0, 1), group("audit", commits={("orders", 1): 40})))],
        [PollExpectation(generations=(("orders", 2, {2}, set(), False),),
                         new_findings=(key(2, 2, "audit"), key(2, 2)))],
        "no earlier poll saw audit, but it has a commit on an old partition of orders: it was reading orders "
        "when the partition was added (joined since the last full poll), so it can miss the new one",
        id="unseen-group-with-commit-on-old-partition",
    ),
    pytest.param(
        billing_store(),
        [poll(orders(3), groups=(billing_reading(0, 1), group("audit", owns=(("orders", 0), ("orders", 1)))))],
        [PollExpectation(generations=(("orders", 2, {2}, set(), False),),
                         new_findings=(key(2, 2, "audit"), key(2, 2)))],
        "no commit yet, but audit's member owns the old partitions and not the added one: its clients still "
        "work from the old count, so it subscribed before the change",
        id="unseen-group-owning-old-partitions-only",
    ),
    pytest.param(
        Store(
            topics={"orders": KnownTopic("orders", ORDERS_ID, 1, frozenset({0, 1}))},
            groups={"billing": KnownGroup("billing", frozenset({"orders"})),
                    "reports": KnownGroup("reports", frozenset({"payments"}))},
        ),
        [poll(orders(3), groups=(billing_reading(0, 1),
                                 group("reports", commits={("payments", 0): 5, ("orders", 0): 7})))],
        [PollExpectation(generations=(("orders", 2, {2}, set(), False),),
                         new_findings=(key(2, 2), key(2, 2, "reports")))],
        "reports was stored reading payments only; its commit on orders 0 shows it started reading orders "
        "before the change, after the last full poll",
        id="known-group-that-started-reading-the-topic-since",
    ),
    pytest.param(
        Store(
            topics={"orders": KnownTopic("orders", ORDERS_ID, 1, frozenset({0, 1}))},
            groups={"billing": KnownGroup("billing", frozenset({"orders"})),
                    "reports": KnownGroup("reports", frozenset({"payments"}))},
        ),
        [poll(orders(3), groups=(billing_reading(0, 1), group("reports", commits={("payments", 0): 5})))],
        [PollExpectation(generations=(("orders", 2, {2}, set(), False),), new_findings=(key(2, 2),))],
        "reports never consumed orders: a partition added to orders is nothing it missed",
        id="group-that-never-read-the-topic",
    ),
    pytest.param(
        Store(topics={"orders": KnownTopic("orders", ORDERS_ID, 1, frozenset({0, 1}))},
              groups={"billing": KnownGroup("billing", frozenset({"orders"}))}),
        [poll(orders(3))],
        [PollExpectation(generations=(("orders", 2, {2}, set(), False),))],
        "billing is no longer listed by the cluster: it has no members and no commits, so no partition "
        "can be missed by it; if it returns, every partition is new to it",
        id="known-group-gone-from-cluster",
    ),
    pytest.param(
        billing_store(also_read=frozenset({"__consumer_offsets"}), __consumer_offsets=CONSUMER_OFFSETS),
        [poll(orders(2), topic("__consumer_offsets", *[(0, 9)] * 4, topic_id="co-id", internal=True),
              groups=(group("billing", commits={("orders", 0): 1, ("__consumer_offsets", 0): 1}),))],
        [PollExpectation(generations=(("__consumer_offsets", 2, {3}, set(), False),))],
        "internal topics get their generation recorded but never a finding, even for a group that read them",
        id="internal-topic-ignored",
    ),
    pytest.param(
        billing_store(),
        [poll(orders(2), topic("payments", (0, 0), (0, 0)), groups=(billing_reading(0, 1),))],
        [PollExpectation(generations=(("payments", 1, {0, 1}, set(), True),))],
        "first sight of a name is generation 1 of a new lineage: nobody can have missed part of it",
        id="first-sight-of-a-topic",
    ),
    pytest.param(
        billing_store(payments=PAYMENTS, gone=replace(PAYMENTS, name="gone", deleted=True)),
        [poll(orders(2), groups=(billing_reading(0, 1),))],
        [PollExpectation(deleted_topics=("payments",))],
        "payments is known and absent from a complete snapshot: deleted; gone was already marked deleted",
        id="topic-deleted",
    ),
    pytest.param(
        billing_store(payments=PAYMENTS),
        [poll(orders(2), topic("payments", (0, 0), (0, 0), topic_id="payments-id-1"),
              groups=(billing_reading(0, 1),))],
        [PollExpectation(generations=(("payments", 5, {1}, set(), False),))],
        "same topic id, one partition more: generation known + 1 = 5; billing never read payments",
        id="generation-counts-from-the-known-one",
    ),
]


@pytest.mark.parametrize("store, polls, expected, why", GENERATION_CASES)
def test_generations_and_new_findings(store: Store, polls: list[Snapshot], expected: list[PollExpectation], why):
    store = deepcopy(store)  # the parameter is shared by every run of this case
    for snapshot, expectation in zip(polls, expected, strict=True):
        changes = store.apply(snapshot)
        generations = tuple(
            (g.topic, g.generation, set(g.added_partitions), set(g.removed_partitions), g.is_new_lineage)
            for g in changes.new_generations
        )
        assert generations == expectation.generations, why
        assert changes.new_findings == expectation.new_findings, why
        assert changes.deleted_topics == expectation.deleted_topics, why
        assert changes.closed_findings == expectation.closed_findings, why
        assert {a.key for a in changes.accounting} >= set(changes.new_findings), "new findings are accounted at once"


def test_removed_partitions_are_recorded_without_findings():
    store = billing_store()
    changes = store.apply(poll(topic("orders", (0, 5), topic_id=ORDERS_ID), groups=(billing_reading(0),)))
    (generation,) = changes.new_generations
    assert (generation.generation, generation.added_partitions, generation.removed_partitions) == (
        2, frozenset(), frozenset({1})
    )
    assert changes.new_findings == ()


# --- Accounting stories on the new partition --------------------------------


LATEST_SHARE = ("latest", "share.auto.offset.reset=latest (the broker's default)")
EARLIEST_SHARE = ("earliest", "share.auto.offset.reset=earliest (set on the group)")
DURATION_SHARE = ("by_duration", "share.auto.offset.reset=by_duration:PT1H (set on the group)")


@dataclass(frozen=True)
class Story:
    steps: tuple[Step, ...]
    states: tuple[str, ...]  # the finding's state after each poll
    final: dict  # exact accounting fields after the last poll
    policy: str = "unknown"
    unowned_after_polls: int = 30
    watched: tuple[bool, ...] | None = None  # is billing in groups_to_watch after each poll
    isolation: str = "unknown"  # billing's declared isolation.level
    explanation_mentions: str = ""


STORIES = [
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180), Step(0, 250, owned=True), Step(0, 300, owned=True, commit=260),
                   Step(0, 900, owned=True, commit=880)),
            states=("pending", "pending", "undecided", "gap", "gap"),
            watched=(False, False, True, False, False),
            final=dict(pre_pickup_high_watermark=180, first_commit=260, missed_definite=0, missed_possible=260,
                       missed_definite_if_latest=180, missed_possible_if_latest=80,
                       backfill_start=0, backfill_end=260, policy_source="assumed", lag=20, committed_offset=880,
                       polls_without_owner=0, expired=0, created_at=T0, log_start_offset=0, high_watermark=900,
                       explanation="policy not declared, assumed latest (the client default): nothing is "
                                   "definitely missed: commits alone cannot tell latest from an earliest group that "
                                   "caught up within one commit interval; 260 possibly missed [0, 260); if the "
                                   "group starts at latest, as assumed: 180 definitely missed [0, 180), 80 possibly "
                                   "missed [180, 260) (the first commit 260 bounds the start)"),
            explanation_mentions="assumed latest",
        ),
        "the last poll with neither owner nor commit saw H=180, and the first commit 260 >= 180; no policy is "
        "declared, so latest is only assumed: an earliest group that read [0,260) within one commit interval "
        "commits the same, so nothing is definite and the sound range [0,260) is possible; the figures under "
        "latest ([0,180) definite, [180,260) possible) travel beside it as conditional; commits at 880 later "
        "change none of these numbers",
        id="group-commits-only-later",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True), Step(0, 260, owned=True, commit=50),
                   Step(0, 400, owned=True, commit=390)),
            states=("pending", "undecided", "covered", "covered"),
            final=dict(pre_pickup_high_watermark=100, first_commit=50, missed_definite=0, missed_possible=0,
                       backfill_start=None, backfill_end=None, policy_source="evidenced", expired=0,
                       explanation="first commit 50 is below 100, the end before pickup: the group did not "
                                   "start at latest"),
        ),
        "the first commit 50 lies below H_k=100: a latest consumer starts at or above 100, so billing started "
        "earlier and is catching up",
        id="earliest-catches-up-slowly",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True, commit=200)),
            states=("pending", "gap"),
            final=dict(missed_definite=0, missed_possible=200, missed_definite_if_latest=100,
                       missed_possible_if_latest=100, backfill_start=0, backfill_end=200, policy_source="assumed"),
            explanation_mentions="if the group starts at latest, as assumed: 100 definitely missed",
        ),
        "caught up within one commit interval: C_f=200 >= H_k=100 looks the same from latest and from a quick "
        "earliest (seen: a fast librdkafka earliest group read from 0 and was told 88 definitely missed); with "
        "nothing declared latest is assumed, so 0 definite, [0,200) possible, the latest figures conditional",
        id="quick-catch-up-undeclared-is-assumed-gap",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True, commit=200)),
            states=("pending", "covered"),
            policy="earliest",
            final=dict(missed_definite=0, missed_possible=0, policy_source="declared", backfill_start=None),
        ),
        "the same commits, but the operator declared earliest: the declaration decides what commits cannot",
        id="quick-catch-up-declared-earliest-is-covered",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150), Step(0, 210, owned=True, commit=210)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(pre_pickup_high_watermark=150, missed_definite=150, missed_possible=60,
                       policy_source="declared", backfill_start=0, backfill_end=210, lag=0,
                       explanation="declared latest: 150 definitely missed [0, 150), 60 possibly missed [150, 210) "
                                   "(the first commit 210 bounds the start)"),
        ),
        "declared latest: [0,150) was written before pickup, [150,210) before the first commit",
        id="declared-latest",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 100, owned=True, commit=100)),
            states=("pending", "gap"),
            policy="latest",
            final=dict(missed_definite=100, missed_possible=0, policy_source="declared", backfill_end=100),
        ),
        "a first commit exactly at H_k=100 is what latest produces when nothing new arrived: no evidence of "
        "earliest, so [0,100) is definitely missed under declared latest",
        id="first-commit-equal-to-pre-pickup-end-is-no-evidence",
    ),
    pytest.param(
        Story(
            steps=(Step(10, 100), Step(10, 150, owned=True)),
            states=("pending", "undecided"),
            final=dict(missed_definite=0, missed_possible=0, missed_definite_if_latest=90,
                       missed_possible_if_latest=0, policy_source="assumed", backfill_start=None),
            explanation_mentions="if the group starts at latest, as assumed: 90 definitely missed [10, 100)",
        ),
        "taken without a commit, latest assumed, on a log that starts at 10: the figure under latest counts "
        "[10, 100), 90 offsets, from the first log start",
        id="taken-without-commit-assumed-from-a-log-start",
    ),
    pytest.param(
        Story(
            steps=(Step(10, 100), Step(10, 200, owned=True, commit=200)),
            states=("pending", "gap"),
            final=dict(missed_definite=0, missed_possible=190, missed_definite_if_latest=90,
                       missed_possible_if_latest=100, backfill_start=10, backfill_end=200,
                       explanation="policy not declared, assumed latest (the client default): nothing is definitely "
                                   "missed: commits alone cannot tell latest from an earliest group that caught up "
                                   "within one commit interval; 190 possibly missed [10, 200); if the group starts "
                                   "at latest, as assumed: 90 definitely missed [10, 100), 100 possibly missed "
                                   "[100, 200) (the first commit 200 bounds the start)"),
        ),
        "the assumed gap's sound range on a log that starts at 10: [10, 200), 190 possibly missed, in numbers "
        "and in words",
        id="assumed-gap-from-a-log-start",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, owned=True), Step(0, 90, owned=True, commit=70)),
            states=("undecided", "gap"),
            policy="latest",
            final=dict(pre_pickup_high_watermark=None, missed_definite=0, missed_possible=70,
                       policy_source="declared", backfill_start=0, backfill_end=70,
                       explanation="declared latest; no poll saw the partition before the group picked it up: "
                                   "nothing is definitely missed: 0 definitely missed [0, 0), 70 possibly missed "
                                   "[0, 70) (the first commit 70 bounds the start)"),
        ),
        "declared latest, but taken before any poll saw the partition without owner: no lower bound, so even a "
        "declared policy proves nothing definite, and the words say why",
        id="declared-latest-taken-before-any-poll",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, owned=True), Step(0, 90, owned=True, commit=70)),
            states=("undecided", "gap"),
            watched=(True, False),
            final=dict(pre_pickup_high_watermark=None, first_commit=70, missed_definite=0, missed_possible=70,
                       missed_definite_if_latest=0, missed_possible_if_latest=70,
                       backfill_start=0, backfill_end=70, policy_source="assumed", polls_without_owner=0,
                       explanation="policy not declared, assumed latest (the client default); no poll saw the "
                                   "partition before the group picked it up: nothing is definitely missed: commits "
                                   "alone cannot tell latest from an earliest group that caught up within one "
                                   "commit interval; 70 possibly missed [0, 70); if the "
                                   "group starts at latest, as assumed: 0 definitely missed [0, 0), 70 possibly "
                                   "missed [0, 70) (the first commit 70 bounds the start)"),
            explanation_mentions="no poll saw the partition before the group picked it up",
        ),
        "billing owned partition 2 at the first poll that saw it: no poll proves a message was written before "
        "pickup, so nothing is definitely missed; under assumed latest [0,70) is possibly missed",
        id="picked-up-before-any-poll-saw-it",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 0, owned=True, commit=0),),
            states=("covered",),
            final=dict(missed_definite=0, missed_possible=0, backfill_start=None, policy_source="assumed"),
        ),
        "picked up and committed at the log start before any poll: even under latest nothing was missed",
        id="picked-up-at-log-start-misses-nothing",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150, owned=True, commit=150), Step(120, 400, owned=True, commit=390)),
            states=("pending", "gap", "expired"),
            policy="latest",
            final=dict(missed_definite=100, missed_possible=50, expired=120, backfill_start=120, backfill_end=150),
            explanation_mentions="120 already deleted by retention",
        ),
        "retention moved the log start to 120: offsets [0,120) of the missed [0,150) are gone, reported as "
        "expired and left out of the backfill, which shrinks to [120,150); the missed counts stay exact",
        id="retention-expires-part-of-gap",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150, owned=True, commit=150), Step(200, 500, owned=True, commit=490)),
            states=("pending", "gap", "expired"),
            policy="latest",
            final=dict(expired=150, backfill_start=None, backfill_end=None, lag=10),
        ),
        "the log start 200 passed the whole missed range [0,150): all 150 expired, nothing left to backfill",
        id="retention-expires-whole-gap",
    ),
    pytest.param(
        Story(
            steps=(Step(30, 100), Step(30, 180), Step(30, 300, owned=True, commit=260)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(first_log_start=30, pre_pickup_high_watermark=180, missed_definite=150, missed_possible=80,
                       backfill_start=30, backfill_end=260, expired=0, log_start_offset=30, lag=40,
                       explanation="declared latest: 150 definitely "
                                   "missed [30, 180), 80 possibly missed [180, 260) (the first commit 260 bounds "
                                   "the start)"),
        ),
        "the partition's log start was already 30 when the finding opened (records deleted before the first "
        "poll): the definite range is [30,180), 150 messages, not 180, and the backfill starts at 30",
        id="log-start-not-zero-counts-from-it",
    ),
    pytest.param(
        Story(
            steps=(Step(30, 100), Step(30, 150, owned=True, commit=150), Step(120, 400, owned=True, commit=390)),
            states=("pending", "gap", "expired"),
            policy="latest",
            final=dict(first_log_start=30, missed_definite=70, missed_possible=50, expired=90, backfill_start=120,
                       backfill_end=150, log_start_offset=120),
            explanation_mentions="90 already deleted by retention",
        ),
        "missed [30,150) with the log start now 120: retention deleted [30,120), 90 offsets, not the 120 below "
        "the log start ([0,30) was never part of the finding); the backfill shrinks to [120,150)",
        id="log-start-not-zero-then-retention",
    ),
    pytest.param(
        Story(
            steps=(Step(30, 100), Step(30, 150, owned=True, commit=150), Step(10, 400, owned=True, commit=390)),
            states=("pending", "gap", "gap"),
            policy="latest",
            final=dict(first_log_start=30, expired=0, backfill_start=30, backfill_end=150, log_start_offset=10),
        ),
        "a log start reported below the one the finding opened at (an unclean leader election can do that): "
        "the backfill still starts at 30, inside the missed range [30,150), and nothing counts as expired",
        id="backfill-never-starts-below-the-missed-range",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150, owned=True, commit=150), Step(150, 400, owned=True, commit=390)),
            states=("pending", "gap", "expired"),
            policy="latest",
            final=dict(expired=150, backfill_start=None, backfill_end=None),
        ),
        "the log start reached exactly the end of the missed range [0,150): all 150 expired, and the empty "
        "[150,150) is no backfill range",
        id="retention-exactly-at-missed-end",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True, commit=50), Step(150, 400, owned=True, commit=390)),
            states=("pending", "covered", "covered"),
            final=dict(expired=0, policy_source="evidenced"),
        ),
        "a covered finding missed nothing, so retention can expire nothing of it",
        id="retention-leaves-covered-alone",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 10), Step(0, 20), Step(0, 30), Step(0, 40)),
            states=("pending", "pending", "unowned", "unowned"),
            unowned_after_polls=3,
            final=dict(polls_without_owner=4, pre_pickup_high_watermark=40, lag=40, owner_member_id=None),
            explanation_mentions="no member has owned the partition for 4 polls",
        ),
        "three polls without an owner while messages keep arriving: billing's clients never picked it up",
        id="unowned-after-n-polls",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 10), Step(0, 20), Step(0, 30, owned=True)),
            states=("pending", "unowned", "undecided"),
            unowned_after_polls=2,
            watched=(False, False, True),
            final=dict(polls_without_owner=0, owner_member_id="billing-1", owner_client_id="billing-app",
                       owner_host="/10.0.0.7", pre_pickup_high_watermark=20),
        ),
        "a member finally owns the partition: taken without a commit (undecided), watched for its first commit",
        id="unowned-then-picked-up",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 0), Step(0, 0), Step(0, 0)),
            states=("pending", "pending", "pending"),
            unowned_after_polls=2,
            final=dict(polls_without_owner=3, lag=0),
        ),
        "no data arrives, so no message is at risk: not unowned however long nobody owns it",
        id="empty-partition-is-never-unowned",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 1), Step(0, 1), Step(0, 1)),
            states=("pending", "unowned", "unowned"),
            unowned_after_polls=2,
            final=dict(polls_without_owner=3),
            explanation_mentions="no member has owned the partition for 3 polls; 1 messages unread",
        ),
        "one unread message is data nobody reads: unowned after two polls without an owner",
        id="one-unread-message-is-enough-for-unowned",
    ),
    pytest.param(
        Story(
            steps=(Step(50, 50), Step(50, 50), Step(50, 50)),
            states=("pending", "pending", "pending"),
            unowned_after_polls=2,
            final=dict(lag=0, first_log_start=50),
            explanation_mentions="0 messages at risk",
        ),
        "log start 50 = high watermark 50: the partition stores nothing, so nothing is at risk and it never "
        "becomes unowned (unread is H - E, not H + E)",
        id="empty-partition-with-non-zero-log-start",
    ),
    pytest.param(
        Story(
            steps=(Step(20, 70),),
            states=("pending",),
            final=dict(lag=50),
            explanation_mentions="no member owns the partition yet; 50 messages at risk",
        ),
        "at risk are the stored messages H - E = 70 - 20",
        id="messages-at-risk-are-h-minus-e",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(20, 300)),
            states=("pending", "pending"),
            final=dict(lag=280, committed_offset=None, expired=0),
        ),
        "without a commit every stored message is unread: lag = H - E = 300 - 20, not 0 or unknown",
        id="lag-without-commit-is-h-minus-e",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True, commit=200, guard_start=0)),
            states=("pending", "covered"),
            final=dict(missed_definite=0, missed_possible=0, policy_source="guard", backfill_start=None),
        ),
        "the guard started at 0, the log start when the partition appeared: exactly nothing missed, though "
        "the commits alone would have assumed a gap",
        id="guard-start-at-log-start-is-covered",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True, commit=200, guard_start=150)),
            states=("pending", "gap"),
            final=dict(missed_definite=150, missed_possible=0, policy_source="guard", backfill_start=0,
                       backfill_end=150),
        ),
        "the guard started at 150: exactly [0,150) missed, nothing possibly missed",
        id="guard-start-late-is-exact-gap",
    ),
    pytest.param(
        Story(
            steps=(Step(30, 100), Step(30, 200, owned=True, commit=200, guard_start=150),
                   Step(30, 400, owned=True, commit=390)),
            states=("pending", "gap", "gap"),
            final=dict(missed_definite=120, missed_possible=0, policy_source="guard", backfill_start=30,
                       backfill_end=150, guard_start_offset=150,
                       explanation="the guard started at 150: [30, 150) missed"),
        ),
        "log start 30, guard started at 150: exactly [30,150), 120 missed; the report is stored with the "
        "finding, so the next poll (with no new report) still decides by it, not by the commits",
        id="guard-with-non-zero-log-start-and-report-kept",
    ),
    pytest.param(
        Story(
            steps=(Step(30, 100), Step(30, 200, owned=True, commit=200, guard_start=30)),
            states=("pending", "covered"),
            final=dict(missed_definite=0, policy_source="guard", guard_start_offset=30),
        ),
        "the guard started at the finding's log start 30: nothing missed",
        id="guard-start-at-non-zero-log-start-is-covered",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 200, owned=True, guard_start=0)),
            states=("pending", "covered"),
            watched=(False, False),
            final=dict(first_commit=None, policy_source="guard"),
        ),
        "the guard's report is exact, so it decides without waiting for a first commit; nothing to watch",
        id="guard-decides-before-first-commit",
    ),
    # --- undecided: taken without a first commit (issue 26) ---
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180, owned=True)),
            states=("pending", "undecided"),
            watched=(False, True),
            final=dict(pre_pickup_high_watermark=100, first_commit=None, missed_definite=0, missed_possible=0,
                       missed_definite_if_latest=100, missed_possible_if_latest=0,
                       backfill_start=None, backfill_end=None, policy_source="assumed", expired=0, lag=180,
                       explanation="billing-app took the partition, no commit yet; policy not declared, assumed "
                                   "latest (the client default): nothing is definitely missed: commits alone "
                                   "cannot tell latest from an earliest group that caught up within one commit "
                                   "interval; if the group starts at latest, as assumed: 100 definitely missed "
                                   "[0, 100); no upper bound on where it started until its first commit: backfill "
                                   "to the current end, reset to earliest while the group is empty, or wait for "
                                   "the commit"),
        ),
        "billing took p and has not committed: nothing the broker observed bounds where it started from above, "
        "so no possible count, no default backfill range, and the operator is told the choices; with latest only "
        "assumed, [0,100) is definitely missed only if latest holds, and says so",
        id="taken-without-commit-is-undecided",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180, owned=True)),
            policy="earliest",
            states=("pending", "undecided"),
            final=dict(missed_definite=0, policy_source="declared", backfill_end=None),
            explanation_mentions="(declared earliest); no upper bound",
        ),
        "declared earliest, taken, no commit yet: nothing is claimed missed, and the finding still waits",
        id="taken-without-commit-declared-earliest",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150, owned=True), Step(0, 200), Step(0, 300, owned=True, commit=280)),
            states=("pending", "undecided", "undecided", "gap"),
            policy="latest",
            final=dict(pre_pickup_high_watermark=100, first_commit=280, missed_definite=100, missed_possible=180,
                       backfill_end=280, pickup_before=T0 + POLL_INTERVAL + OBSERVED_UNTIL),
        ),
        "the first member took p at the second poll and left before committing; the third poll sees nobody, "
        "but the first member may have read from 100 on, so H_k stays 100 (not 200): the definite range never "
        "claims what a member may have read",
        id="taken-then-let-go-keeps-h-k",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150, owned=True), Step(0, 200)),
            states=("pending", "undecided", "undecided"),
            policy="latest",
            final=dict(pre_pickup_high_watermark=100, missed_definite=100, owner_member_id=None),
            explanation_mentions="a member took the partition, no commit yet",
        ),
        "the member that took p left without committing: still undecided, said of \"a member\" since no "
        "member owns p now",
        id="taken-then-let-go-is-still-undecided",
    ),
    pytest.param(
        Story(
            steps=(Step(30, 100), Step(30, 180, owned=True)),
            policy="latest",
            states=("pending", "undecided"),
            final=dict(first_log_start=30, missed_definite=70, policy_source="declared", backfill_end=None),
            explanation_mentions="declared latest: 70 definitely missed [30, 100)",
        ),
        "declared latest, taken without a commit, log start 30: [30,100) is missed, counted from the log start",
        id="taken-without-commit-declared-latest-from-a-log-start",
    ),
    # --- the likely start: an estimate, never a bound (issues 11, 26) ---
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180), Step(0, 250, owned=True),
                   Step(0, 300, owned=True, commit=290, likely_start=200)),
            states=("pending", "pending", "undecided", "gap"),
            policy="latest",
            final=dict(pre_pickup_high_watermark=180, first_commit=290, missed_definite=180, missed_possible=110,
                       backfill_start=0, backfill_end=290, likely_start=200,
                       pickup_after=T0 + POLL_INTERVAL + GROUPS_FROM,
                       pickup_before=T0 + 2 * POLL_INTERVAL + OBSERVED_UNTIL,
                       likely_start_evidence="time index (CreateTime)",
                       explanation="declared latest: 180 definitely "
                                   "missed [0, 180), 110 possibly missed [180, 290) (the first commit 290 bounds "
                                   "the start); likely start 200 (an estimate: time index (CreateTime), pickup "
                                   "observed within 60.1s)"),
        ),
        "the time index at pickup + grace says 200, but a slow member or a producer clock ahead moves it: it is "
        "shown as an estimate with its evidence, while possible and the default backfill end at the first "
        "commit 290, the only upper bound the broker observed",
        id="likely-start-is-an-estimate-not-a-bound",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180), Step(0, 250, owned=True, commit=260, likely_start=400)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(missed_definite=180, missed_possible=80, backfill_end=260, likely_start=260),
            explanation_mentions="likely start 260 (an estimate",
        ),
        "a time index answer of 400 (producer clock behind, or a late resolution) lies above the first commit "
        "260, where a latest member cannot have started: the estimate is kept at 260",
        id="likely-start-above-first-commit-is-kept-at-it",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180), Step(0, 250, owned=True, commit=260, likely_start=150)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(missed_definite=180, missed_possible=80, backfill_end=260, likely_start=180),
        ),
        "H_k=180 was observed directly while nobody owned p: a time index answer of 150 (producer clock "
        "ahead) cannot lower it; the estimate is raised to 180 and definite stays [0,180)",
        id="likely-start-below-h-k-is-raised-to-it",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100, likely_start=50), Step(0, 150, owned=True, commit=140)),
            states=("pending", "gap"),
            policy="latest",
            final=dict(likely_start=None, pickup_before=T0 + POLL_INTERVAL + OBSERVED_UNTIL, missed_definite=100,
                       missed_possible=40),
        ),
        "a likely start handed over before any observation showed an owner has no pickup to estimate: ignored",
        id="likely-start-before-pickup-is-ignored",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100, owned=True), Step(0, 200, owned=True, commit=190, likely_start=120)),
            states=("undecided", "gap"),
            final=dict(pre_pickup_high_watermark=None, missed_definite=0, missed_possible=190, backfill_end=190,
                       likely_start=120, pickup_after=None, pickup_before=T0 + OBSERVED_UNTIL),
            explanation_mentions="likely start 120 (an estimate: time index (CreateTime))",
        ),
        "the group owned p at the first observation (KIP-848 groups take it within seconds): nothing is "
        "definite and possible runs to the first commit, [0,190); the time index only gives an estimate",
        id="pickup-before-first-observation-with-time-index",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180, owned=True, likely_start=190),
                   Step(0, 300, owned=True, commit=290, likely_start=250)),
            states=("pending", "undecided", "gap"),
            policy="latest",
            final=dict(likely_start=190, likely_start_evidence="time index (CreateTime)", missed_definite=100,
                       missed_possible=190, backfill_end=290),
            explanation_mentions="likely start 190 (an estimate: time index (CreateTime), pickup observed within",
        ),
        "the likely start is resolved once and kept: a later, larger answer changes nothing; how it was found "
        "is stored with it, so the poll that decides (the next one) still names its evidence",
        id="likely-start-frozen-once-set",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180, owned=True, commit=200, guard_start=120, likely_start=150)),
            states=("pending", "gap"),
            final=dict(missed_definite=120, missed_possible=0, policy_source="guard", backfill_end=120),
        ),
        "the guard's report is exact and beats the time index",
        id="guard-beats-pickup-end",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 180, owned=True, commit=200, likely_start=150)),
            policy="earliest",
            states=("pending", "covered"),
            final=dict(missed_definite=0, missed_possible=0, policy_source="declared", backfill_start=None),
            explanation_mentions="declared earliest; first commit 200 cannot tell otherwise",
        ),
        "a declared earliest decides: the likely start only matters to a latest start",
        id="declared-earliest-ignores-pickup-end",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100), Step(0, 150, targeted=True), Step(0, 200, targeted=True), Step(0, 250)),
            unowned_after_polls=2,
            states=("pending", "pending", "pending", "unowned"),
            final=dict(polls_without_owner=2, pre_pickup_high_watermark=250),
        ),
        "the watcher's targeted snapshots raise H_k (they are observations) but do not count as polls: "
        "unowned after 2 polls means 2 full polls, not 2 seconds of watching",
        id="targeted-snapshots-do-not-count-as-polls",
    ),
    # --- share groups (KIP-932, issue 25): the start offset is the position, the group config the policy ---
    pytest.param(
        Story(
            steps=(Step(0, 40, share=LATEST_SHARE), Step(0, 51, owned=True, share=LATEST_SHARE),
                   Step(0, 80, owned=True, commit=51, share=LATEST_SHARE)),
            policy="earliest",
            states=("pending", "undecided", "gap"),
            final=dict(pre_pickup_high_watermark=40, first_commit=51, missed_definite=40, missed_possible=11,
                       backfill_end=51, policy_source="declared", lag=29,
                       explanation="share.auto.offset.reset=latest (the broker's default): 40 definitely missed "
                                   "[0, 40), 11 possibly missed [40, 51) (the first start offset 51 bounds the "
                                   "start)"),
        ),
        "the issue's loss: a share group under the default latest initialised p at 51; the last observation "
        "without it saw 40, and start offsets only move forward, so [0,40) is definite and [40,51) possible. "
        "The cluster's setting beats an operator's declaration (earliest here)",
        id="share-group-latest-by-default",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=LATEST_SHARE), Step(0, 51, owned=True, share=LATEST_SHARE)),
            states=("pending", "undecided"),
            final=dict(missed_definite=40, backfill_end=None),
            explanation_mentions="billing-app took the partition, no start offset yet; share.auto.offset.reset="
                                 "latest (the broker's default): 40 definitely missed [0, 40), then no upper bound "
                                 "on where it started until its first start offset",
        ),
        "assigned but not yet initialised (no start offset until the first fetch): undecided, in share words",
        id="share-group-assigned-not-initialised",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=EARLIEST_SHARE), Step(0, 60, owned=True, commit=60, share=EARLIEST_SHARE)),
            states=("pending", "covered"),
            final=dict(missed_definite=0, missed_possible=0, policy_source="declared", backfill_start=None),
            explanation_mentions="share.auto.offset.reset=earliest (set on the group); first start offset 60",
        ),
        "an explicit earliest on the group: covered even when every record was already acknowledged (the "
        "start offset moved past H_k)",
        id="share-group-explicit-earliest-is-covered",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=DURATION_SHARE), Step(0, 60, owned=True, commit=30, share=DURATION_SHARE)),
            states=("pending", "gap"),
            final=dict(missed_definite=0, missed_possible=30, backfill_start=0, backfill_end=30,
                       policy_source="declared",
                       explanation="share.auto.offset.reset=by_duration:PT1H (set on the group): the start comes "
                                   "from record timestamps, so nothing is definitely missed; 30 possibly missed "
                                   "[0, 30) (the first start offset 30 bounds the start)"),
        ),
        "by_duration starts where record timestamps say, possibly below H_k: a first start offset below 40 is "
        "no evidence of earliest, nothing is definite, [0, first start offset) is possible",
        id="share-group-by-duration-start-below-h-k",
    ),
    pytest.param(
        Story(
            steps=(Step(10, 40, share=DURATION_SHARE), Step(10, 60, owned=True, commit=30, share=DURATION_SHARE)),
            states=("pending", "gap"),
            final=dict(first_log_start=10, missed_definite=0, missed_possible=20, backfill_start=10,
                       backfill_end=30),
            explanation_mentions="20 possibly missed [10, 30) (the first start offset 30 bounds the start)",
        ),
        "by_duration above a log start of 10: possible counts from the log start, not from 0",
        id="share-group-by-duration-from-a-log-start",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=DURATION_SHARE), Step(0, 60, owned=True, share=DURATION_SHARE),
                   Step(0, 60, owned=True, commit=0, share=DURATION_SHARE)),
            states=("pending", "undecided", "covered"),
            final=dict(missed_definite=0, missed_possible=0, backfill_start=None, policy_source="declared"),
            explanation_mentions="the group started at the log start: nothing missed",
        ),
        "by_duration, taken: undecided with nothing definite; a first start offset at the log start covers it",
        id="share-group-by-duration-from-the-log-start",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=DURATION_SHARE), Step(0, 60, owned=True, share=DURATION_SHARE)),
            states=("pending", "undecided"),
            final=dict(missed_definite=0, policy_source="declared"),
            explanation_mentions="no start offset yet; share.auto.offset.reset=by_duration:PT1H (set on the "
                                 "group): the start comes from record timestamps, so nothing is definitely missed",
        ),
        "by_duration, assigned without a start offset: nothing definite while H_k is 40",
        id="share-group-by-duration-undecided",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=LATEST_SHARE), Step(0, 60, owned=True, commit=20, share=LATEST_SHARE)),
            states=("pending", "covered"),
            final=dict(policy_source="evidenced", missed_definite=0),
            explanation_mentions="first start offset 20 is below 40, the end before pickup",
        ),
        "a first start offset below H_k: a latest start cannot be there (an operator reset it), so covered",
        id="share-group-start-below-h-k-is-evidence",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 100, target=True),),
            states=("pending",),
            final=dict(owner_member_id=None, pre_pickup_high_watermark=100),
            explanation_mentions="target assignment",
        ),
        "KIP-848: the coordinator put p in the member's target; until it is in the member's assignment the "
        "member has not started, so the finding stays pending and H keeps counting as before pickup",
        id="kip848-target-is-not-yet-owned",
    ),
    pytest.param(
        Story(
            steps=(Step(20, 70, target=True),),
            states=("pending",),
            final=dict(lag=50),
            explanation_mentions="billing-app is being given the partition (target assignment); 50 messages at risk",
        ),
        "a member being given p has not read yet: at risk are the stored messages H - E = 70 - 20, as without it",
        id="kip848-target-at-risk-is-h-minus-e",
    ),
    # --- transactions (issue 32): a read_committed latest member starts at the last stable offset ---
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=0), Step(0, 36, owned=True, open_transaction_from=0),
                   Step(0, 40, owned=True, commit=37)),
            states=("pending", "undecided", "gap"),
            policy="latest",
            final=dict(pre_pickup_high_watermark=30, pre_pickup_stable_offset=0, missed_definite=0,
                       missed_possible=37, backfill_start=0, backfill_end=37, policy_source="declared",
                       explanation="declared latest: 0 definitely missed "
                                   "[0, 0), 37 possibly missed [0, 37) (the first commit 37 bounds the start); a "
                                   "transaction was open at the pickup: the last stable offset 0 was below the end "
                                   "30, and a read_committed member starts at the last stable offset (isolation "
                                   "not declared: read_committed, librdkafka's default, is assumed), so [0, 30) is "
                                   "possibly, not definitely, missed"),
        ),
        "the issue's case: 30 records in a transaction open across the pickup; a read_committed member starting "
        "at latest starts at the LSO 0 and loses nothing, so nothing is definite; the isolation is not declared "
        "and librdkafka's default is read_committed: [L_k, H_k) = [0, 30) is only possible",
        id="transaction-open-at-pickup-isolation-unknown",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=0), Step(0, 36, owned=True, open_transaction_from=0),
                   Step(0, 40, owned=True, commit=37)),
            isolation="read_uncommitted",
            states=("pending", "undecided", "gap"),
            policy="latest",
            final=dict(pre_pickup_stable_offset=0, missed_definite=30, missed_possible=7, backfill_start=0,
                       backfill_end=37,
                       explanation="declared latest: 30 definitely missed "
                                   "[0, 30), 7 possibly missed [30, 37) (the first commit 37 bounds the start)"),
        ),
        "declared read_uncommitted: its latest start is the high watermark whatever the transactions, so H_k "
        "bounds it again: [0, 30) definite, and the words say nothing of transactions",
        id="transaction-open-at-pickup-read-uncommitted-declared",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=12), Step(0, 40, owned=True, commit=37)),
            isolation="read_committed",
            states=("pending", "gap"),
            policy="latest",
            final=dict(missed_definite=12, missed_possible=25),
            explanation_mentions="a read_committed member starts at the last stable offset (declared read_committed), "
                                 "so [12, 30) is possibly, not definitely, missed",
        ),
        "declared read_committed, transaction open from 12: [0, 12) committed before it is definite, the rest "
        "possible",
        id="transaction-open-at-pickup-read-committed-declared",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=0), Step(0, 40, owned=True, commit=20)),
            states=("pending", "gap"),
            final=dict(policy_source="assumed", missed_definite=0, missed_possible=20),
        ),
        "a first commit at 20, below H_k 30 but above L_k 0: a read_committed latest member can commit there, "
        "so it is no evidence of earliest (it was 'covered' before issue 32)",
        id="transaction-commit-between-lso-and-hw-is-no-evidence",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=0), Step(0, 40, owned=True, commit=20)),
            isolation="read_uncommitted",
            states=("pending", "covered"),
            final=dict(policy_source="evidenced"),
            explanation_mentions="first commit 20 is below 30, the end before pickup",
        ),
        "the same commit from a declared read_uncommitted group is evidence: its latest start is at least 30",
        id="transaction-commit-below-hw-read-uncommitted-is-evidence",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=10), Step(0, 40, owned=True, commit=5)),
            states=("pending", "covered"),
            final=dict(policy_source="evidenced", missed_definite=0, missed_possible=0),
            explanation_mentions="first commit 5 is below 10, the last stable offset before pickup",
        ),
        "a first commit below L_k: no latest member, read committed or not, starts there, so covered, and the "
        "words name the last stable offset as the bound it is below",
        id="transaction-commit-below-lso-is-evidence",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=LATEST_SHARE, open_transaction_from=10),
                   Step(0, 60, owned=True, commit=51, share=LATEST_SHARE)),
            isolation="read_uncommitted",
            states=("pending", "gap"),
            final=dict(missed_definite=40, missed_possible=11, policy_source="declared"),
        ),
        "a share group declared read_uncommitted: the cluster's setting gives its policy, the declaration its "
        "isolation, so H_k bounds it though a transaction was open",
        id="transaction-share-group-declared-read-uncommitted",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 40, share=LATEST_SHARE, open_transaction_from=10),
                   Step(0, 60, owned=True, commit=51, share=LATEST_SHARE)),
            states=("pending", "gap"),
            final=dict(missed_definite=10, missed_possible=41),
            explanation_mentions="a transaction was open at the pickup",
        ),
        "the same share group, isolation not declared: bounded by the last stable offset",
        id="transaction-share-group-isolation-unknown",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 20, open_transaction_from=5), Step(0, 30, open_transaction_from=25),
                   Step(0, 40, owned=True, commit=40)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(pre_pickup_stable_offset=25, pre_pickup_high_watermark=30, missed_definite=25,
                       missed_possible=15),
        ),
        "L_k is read at the same observation as H_k: both move to the last one without an owner (25 and 30)",
        id="transaction-l-k-from-the-last-observation-without-owner",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 20, open_transaction_from=5), Step(0, 30, stable_unread=True),
                   Step(0, 40, owned=True, commit=40)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(pre_pickup_stable_offset=5, pre_pickup_high_watermark=30, missed_definite=5,
                       missed_possible=35),
        ),
        "an observation that did not read the LSO keeps the last one read (5): the LSO only grows, so an older "
        "one is still at or below any later start; never the high watermark in its place",
        id="transaction-lso-unread-keeps-the-last-one",
    ),
    pytest.param(
        Story(
            steps=(Step(3, 30, stable_unread=True), Step(3, 40, owned=True, commit=40)),
            states=("pending", "gap"),
            final=dict(pre_pickup_stable_offset=3, missed_definite=0, missed_possible=37),
        ),
        "no LSO ever read: the floor falls to the first log start, the only sound one; nothing definite",
        id="transaction-lso-never-read-falls-to-the-log-start",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 20, open_transaction_from=0), Step(0, 31), Step(0, 40, owned=True, commit=35)),
            states=("pending", "pending", "gap"),
            policy="latest",
            final=dict(pre_pickup_stable_offset=31, missed_definite=31, missed_possible=4,
                       explanation="declared latest: 31 definitely missed "
                                   "[0, 31), 4 possibly missed [31, 35) (the first commit 35 bounds the start)"),
        ),
        "a transaction open at an early poll but committed before the last one without owner: L_k = H_k, the "
        "bracket is as without transactions",
        id="transaction-closed-before-the-pickup-changes-nothing",
    ),
    pytest.param(
        Story(
            steps=(Step(0, 30, open_transaction_from=10), Step(0, 36, owned=True)),
            states=("pending", "undecided"),
            policy="latest",
            final=dict(missed_definite=10),
            explanation_mentions="10 definitely missed [0, 10); a transaction was open at the pickup",
        ),
        "taken, no commit yet: the definite part already stops at L_k",
        id="transaction-undecided-definite-stops-at-l-k",
    ),
]


@pytest.mark.parametrize("story, why", STORIES)
def test_gap_accounting(story: Story, why: str):
    store = billing_store(policy=story.policy, unowned_after_polls=story.unowned_after_polls,
                          isolation=story.isolation)
    states, watched, transitions = [], [], []
    for step in story.steps:
        if step.guard_start is not None:
            store.report_guard(NEW_PARTITION, step.guard_start)
        ends = {NEW_PARTITION: LikelyStart(step.likely_start, "time index (CreateTime)")} if step.likely_start else None
        changes = store.apply(step.snapshot(store.now), likely_starts=ends)
        (accounting,) = [a for a in changes.accounting if a.key == NEW_PARTITION]
        states.append(accounting.state)
        watched.append("billing" in changes.groups_to_watch)
        transitions.extend(changes.transitions)

    assert tuple(states) == story.states, why
    if story.watched is not None:
        assert tuple(watched) == story.watched, why
    actual = {name: getattr(accounting, name) for name in story.final}
    assert actual == story.final, why
    assert story.explanation_mentions in accounting.explanation
    # A transition for creation, then one per change of state, none for polls that keep it.
    expected_transitions = [StateTransition(NEW_PARTITION, None, story.states[0])] + [
        StateTransition(NEW_PARTITION, old, new) for old, new in zip(story.states, story.states[1:]) if old != new
    ]
    assert transitions == expected_transitions, why


def test_new_finding_is_accounted_from_the_snapshot_that_opens_it():
    store = billing_store()
    changes = store.apply(Step(5, 70).snapshot())

    (accounting,) = changes.accounting
    assert changes.new_findings == (NEW_PARTITION,)
    assert (accounting.created_at, accounting.first_log_start, accounting.pre_pickup_high_watermark) == (T0, 5, 70)
    assert (accounting.polls_without_owner, accounting.lag, accounting.policy_source) == (1, 65, None)


def test_groups_to_watch_lists_only_groups_picking_a_finding_up():
    store = Store(
        topics={"orders": KnownTopic("orders", ORDERS_ID, 1, frozenset({0, 1}))},
        groups={g: KnownGroup(g, frozenset({"orders"})) for g in ("billing", "audit", "search")},
    )
    changes = store.apply(poll(topic("orders", (0, 9), (0, 9), (0, 9), topic_id=ORDERS_ID), groups=(
        group("billing", owns=(("orders", 2),)),  # owns the new partition, no commit yet: undecided, watch
        group("audit", owns=(("orders", 0),)),  # nobody in audit owns it yet: pending, nothing to catch
        group("search", owns=(("orders", 2),), commits={("orders", 2): 9}),  # already committed: decided
    )))

    assert changes.groups_to_watch == frozenset({"billing"})
    assert {a.key.group_id: a.state for a in changes.accounting} == {
        "billing": "undecided", "audit": "pending", "search": "gap"
    }


def test_a_finding_whose_group_is_gone_waits_and_the_others_are_still_accounted():
    store = Store(
        topics={"orders": KnownTopic("orders", ORDERS_ID, 1, frozenset({0, 1}))},
        groups={g: KnownGroup(g, frozenset({"orders"})) for g in ("audit", "billing")},
    )
    store.apply(poll(orders(3), groups=(group("audit", commits={("orders", 0): 5}), billing_reading(0, 1))))
    assert set(store.findings) == {key(2, 2, "audit"), key(2, 2, "billing")}

    # audit's finding comes first; the cluster no longer lists audit: no member, no commit to account.
    changes = store.apply(poll(orders(3), groups=(billing_reading(0, 1),)))

    assert [a.key for a in changes.accounting] == [key(2, 2, "billing")]
    assert store.findings[key(2, 2, "audit")].state == "pending", "its stored state waits for the group"


def test_a_targeted_snapshot_deletes_only_topics_in_its_scope():
    store = billing_store(payments=PAYMENTS)
    changes = store.apply(poll(orders(2), groups=(billing_reading(0, 1),), scope=frozenset({"orders"})))
    assert changes.deleted_topics == (), "payments is outside the watcher's scope: absent, not deleted"

    changes = store.apply(poll(groups=(billing_reading(0, 1),), scope=frozenset({"orders", "payments"})))
    assert changes.deleted_topics == ("orders", "payments"), "in scope and absent: deleted"


def test_a_snapshot_finds_its_topics_by_name():
    snapshot = poll(orders(2), topic("payments", (0, 5)))
    assert snapshot.topic("payments").partition_ids == frozenset({0})
    assert snapshot.topic("orders").name == "orders"
    assert snapshot.topic("missing") is None


LAG_CASES = [
    pytest.param(dict(high_watermark=90, log_start=20, committed=None), 70,
                 "no commit: the group will read every stored message, H - E (never 0, never unknown)",
                 id="no-commit"),
    pytest.param(dict(high_watermark=90, log_start=20, committed=50), 40,
                 "a commit inside the log: it reads next from its commit, H - C", id="commit-inside-log"),
    pytest.param(dict(high_watermark=90, log_start=60, committed=50), 30,
                 "retention passed the commit: the next message it can read is the log start, H - E",
                 id="commit-below-log-start"),
    pytest.param(dict(high_watermark=90, log_start=20, committed=95), 0,
                 "a commit past the end (a truncated log): nothing left to read, never negative",
                 id="commit-past-end"),
    pytest.param(dict(high_watermark=90, log_start=None, committed=50), 40,
                 "the poll did not read the log start (no finding there): the commit alone, H - C",
                 id="log-start-not-read"),
    pytest.param(dict(high_watermark=90, log_start=90, committed=None), 0,
                 "an empty log and no commit: nothing to read", id="empty-log"),
]


@pytest.mark.parametrize("positions, lag, why", LAG_CASES)
def test_the_one_lag_rule(positions: dict, lag: int, why: str):
    assert partition_lag(**positions) == lag, why


# --- group kinds whose framework defaults to earliest (issue 25) -------------

KIND_CASES = [
    pytest.param("connect-s3-sink", "classic", None, "unknown", ("covered", "assumed"), "Kafka Connect's default",
                 "a Connect sink's group (connect-<name>) starts at earliest unless overridden: covered, and the "
                 "assumption is named with how to undo it", id="connect-sink-assumed-earliest"),
    pytest.param("connect-s3-sink", "consumer", None, "latest", ("gap", "declared"), "declared latest",
                 "an operator who declared the sink latest (consumer.override) gets it counted", id="connect-declared"),
    pytest.param("s3-sink", "classic", None, "unknown", ("gap", "assumed"), "assumed latest",
                 "only the connect- prefix names a Connect sink", id="not-connect"),
    pytest.param("wordcount", "streams", None, "unknown", ("covered", "assumed"), "Kafka Streams' default",
                 "a streams group (KIP-1071) starts at earliest unless a source topic says latest", id="streams"),
    pytest.param("wordcount", "streams", None, "latest", ("gap", "declared"), "declared latest",
                 "a streams group declared latest is counted like any latest group", id="streams-declared"),
    pytest.param("connect-queue", "share", ("latest", "share.auto.offset.reset=latest (the broker's default)"),
                 "unknown", ("gap", "declared"), "share.auto.offset.reset=latest",
                 "a share group's own setting beats its name", id="share-named-connect"),
    pytest.param("queue", "share", None, "unknown", ("gap", "assumed"), "the first start offset 160 bounds",
                 "a share group whose setting was not read still speaks of start offsets", id="share-without-setting"),
]


@pytest.mark.parametrize("group_id, kind, share, declared, verdict, words, why", KIND_CASES)
def test_a_frameworks_default_is_assumed_only_for_its_undeclared_groups(group_id, kind, share, declared, verdict,
                                                                         words, why):
    _kind_story(group_id, kind, share, {group_id: KnownGroup(group_id, frozenset({"orders"}), declared)},
                verdict, words, why)


@pytest.mark.parametrize("group_id, kind, share, declared, verdict, words, why",
                         [case for case in KIND_CASES if case.values[3] == "unknown"])
def test_a_group_no_poll_stored_gets_its_frameworks_default_and_its_clusters_setting(group_id, kind, share, declared,
                                                                                     verdict, words, why):
    """The same verdicts for a group the store never knew (it joined since the
    last full poll, read_before_change): nothing declared, the cluster's
    setting and the framework's default still apply."""
    _kind_story(group_id, kind, share, {}, verdict, words, why)


def _kind_story(group_id, kind, share, known_groups, verdict, words, why):
    store = billing_store()
    store.groups = known_groups

    def seen(high_watermark, *, owned, commit=None):
        commits = {("orders", 0): 1000, ("orders", 1): 1000, **({("orders", 2): commit} if commit is not None else {})}
        owns = (("orders", 0), ("orders", 1)) + ((("orders", 2),) if owned else ())
        member = group(group_id, owns=owns, commits=commits)
        if share is not None:
            member = replace(member, reset_policy=share[0], reset_setting=share[1])
        return poll(topic("orders", (0, 1000), (0, 1000), (0, high_watermark), topic_id=ORDERS_ID),
                    groups=(replace(member, type=kind),))

    key_ = key(2, 2, group_id=group_id)
    store.apply(seen(100, owned=False))
    taken = {a.key: a for a in store.apply(seen(150, owned=True)).accounting}[key_]
    decided = {a.key: a for a in store.apply(seen(200, owned=True, commit=160)).accounting}[key_]

    assert (taken.state, taken.policy_source) == ("undecided", verdict[1]), why
    assert (decided.state, decided.policy_source) == verdict, why
    assert words in decided.explanation, why
    # Definite only where a policy is stated: an assumed latest gives the sound range as possible.
    expected = (0, 0) if verdict[0] != "gap" else (0, 160) if verdict[1] == "assumed" else (100, 60)
    assert (decided.missed_definite, decided.missed_possible) == expected, why
    if verdict == ("gap", "assumed"):
        assert (decided.missed_definite_if_latest, decided.missed_possible_if_latest) == (100, 60), why


# --- The policy from the group's own starts (issue 41) ----------------------


def _two_new_partitions(store: Store, *, p2: dict, p3: dict, before: int = 100) -> Changes:
    """orders grows from 2 to 4 partitions; a poll sees both new ones at ``before``
    without owner, the next one as ``p2`` and ``p3`` say (owned, commit)."""
    def seen(offsets: dict, parts: dict) -> Snapshot:
        commits = {("orders", 0): 1000, ("orders", 1): 1000}
        owns = [("orders", 0), ("orders", 1)]
        for partition, state in parts.items():
            if state.get("commit") is not None:
                commits[("orders", partition)] = state["commit"]
            if state.get("owned"):
                owns.append(("orders", partition))
        return poll(topic("orders", (0, 1000), (0, 1000), *offsets, topic_id=ORDERS_ID),
                    groups=(group("billing", owns=tuple(owns), commits=commits),))

    store.apply(seen(((0, before), (0, before)), {}))
    return store.apply(seen(((0, 300), (0, 300)), {2: p2, 3: p3}))


EVIDENCE_CASES = [
    pytest.param(
        "unknown", "unknown", dict(owned=True, commit=40), dict(owned=True, commit=300),
        ("covered", "evidenced"), ("covered", "evidenced"), "earliest",
        "billing's first commit on partition 2 (40) lies below the end 100 before it took the partition: it did "
        "not start at latest. Partition 3, taken in the same rebalance with a first commit at the end (300), "
        "cannot tell by itself, but the group's own start on partition 2 decides it: covered, evidenced",
        id="one-partition-proves-the-other",
    ),
    pytest.param(
        "unknown", "earliest", dict(owned=True, commit=300), dict(owned=True, commit=300),
        ("covered", "evidenced"), ("covered", "evidenced"), None,
        "an earlier expansion proved billing starts below the end: commits at the end no longer read as a gap",
        id="stored-evidence-decides",
    ),
    pytest.param(
        "unknown", "latest", dict(owned=True, commit=300), dict(owned=True, commit=300),
        ("gap", "evidenced"), ("gap", "evidenced"), None,
        "billing was seen starting at the end (a guard report): the definite count is a fact again",
        id="stored-latest-evidence-makes-definite",
    ),
    pytest.param(
        "latest", "unknown", dict(owned=True, commit=40), dict(owned=True, commit=300),
        ("covered", "evidenced"), ("gap", "declared"), "earliest",
        "an operator's declaration wins over evidence for the findings the evidence does not cover itself: "
        "partition 2's own commit below H_k still covers it, partition 3 follows the declaration; the evidence "
        "is recorded all the same, for the operator to see",
        id="declaration-wins",
    ),
    pytest.param(
        "unknown", "unknown", dict(owned=True, commit=100), dict(owned=True, commit=300),
        ("gap", "assumed"), ("gap", "assumed"), None,
        "a first commit exactly at the end before pickup is what latest gives and what a quick earliest gives: "
        "no evidence either way, latest stays an assumption",
        id="commit-at-the-end-proves-nothing",
    ),
    pytest.param(
        "unknown", "unknown", dict(owned=True, commit=0), dict(owned=True, commit=300),
        ("covered", "evidenced"), ("covered", "evidenced"), "earliest",
        "a first commit at the log start itself, while the end was 100: the lowest start there is, not latest",
        id="commit-at-the-log-start-proves-earliest",
    ),
]


@pytest.mark.parametrize("declared, stored, p2, p3, verdict2, verdict3, evidenced, why", EVIDENCE_CASES)
def test_a_groups_own_start_decides_its_policy(declared, stored, p2, p3, verdict2, verdict3, evidenced, why):
    store = billing_store(policy=declared)
    store.groups["billing"] = replace(store.groups["billing"], evidenced_policy=stored,
                                      policy_evidence=f"seen starting at {stored}" if stored != "unknown" else "")
    changes = _two_new_partitions(store, p2=p2, p3=p3)
    found = {a.key.partition: a for a in changes.accounting}
    assert (found[2].state, found[2].policy_source) == verdict2, why
    assert (found[3].state, found[3].policy_source) == verdict3, why
    assert [(e.group_id, e.policy) for e in changes.policy_evidence] == (
        [("billing", evidenced)] if evidenced else []), why
    if verdict3 == ("gap", "evidenced"):
        assert (found[3].missed_definite, found[3].missed_possible) == (100, 200), why
        assert found[3].missed_definite_if_latest is None, "a proven policy needs no conditional figures"
    if evidenced:
        (proof,) = changes.policy_evidence
        assert proof.words == (f"its first commit on orders[2] (generation 2) was {p2['commit']}, below the end 100 "
                               "before it took the partition: it did not start at latest"), why


# (the end before the pickup, the guard's start, the policy proven, its words)
GUARD_EVIDENCE_CASES = [
    pytest.param(100, 0, "earliest", "the guard reported a start on orders[2] (generation 2) at the log start 0 "
                 "while the end was 100", id="guard-at-log-start"),
    pytest.param(100, 150, "latest", "the guard reported a start on orders[2] (generation 2) at 150, at or above "
                 "the end 100 before the pickup", id="guard-above-the-end"),
    pytest.param(100, 100, "latest", "the guard reported a start on orders[2] (generation 2) at 100, at or above "
                 "the end 100 before the pickup", id="guard-at-the-end"),
    pytest.param(100, 60, None, None, id="guard-between-proves-neither"),
    pytest.param(0, 0, None, None, id="guard-on-an-empty-partition-proves-neither"),
]


@pytest.mark.parametrize("before, guard_start, policy, words", GUARD_EVIDENCE_CASES)
def test_a_guard_report_is_evidence_of_the_policy(before, guard_start, policy, words):
    """The consumer-side guard reports where the member started: at the log
    start while there was data (not latest), at or above the end before the
    pickup (latest); between the two it proves neither, nor does any start on
    a partition still empty before the pickup (the log start was the end)."""
    store = billing_store()
    store.apply(Step(0, before).snapshot())
    store.report_guard(NEW_PARTITION, guard_start)
    changes = store.apply(Step(0, 200, owned=True).snapshot(store.now))
    assert [(e.policy, e.words) for e in changes.policy_evidence] == ([(policy, words)] if policy else [])
    if policy:
        assert store.groups["billing"].evidenced_policy == policy


def test_evidence_is_written_once_not_at_every_poll():
    store = billing_store()
    first = _two_new_partitions(store, p2=dict(owned=True, commit=40), p3=dict(owned=True, commit=300))
    again = store.apply(poll(topic("orders", (0, 1000), (0, 1000), (0, 400), (0, 400), topic_id=ORDERS_ID),
                             groups=(billing_reading(0, 1, 2, 3),)))
    assert [e.policy for e in first.policy_evidence] == ["earliest"]
    assert again.policy_evidence == (), "the stored evidence already says earliest"


GUARD_WORDS = "the guard reported a start on orders[2] (generation 1) at 500, at or above the end 400 before the pickup"


@pytest.mark.parametrize("words, said", [(GUARD_WORDS, GUARD_WORDS), ("", "seen starting at latest")],
                         ids=["stored-words", "stored-without-words"])
def test_stored_evidence_decides_in_its_own_words(words, said):
    """A policy learnt at an earlier expansion decides in the words stored with
    it; evidence stored without words (a row from before the words were kept)
    still decides as evidence, said plainly."""
    store = billing_store()
    store.groups["billing"] = replace(store.groups["billing"], evidenced_policy="latest", policy_evidence=words)
    found = {a.key.partition: a for a in _two_new_partitions(
        store, p2=dict(owned=True, commit=300), p3=dict(owned=True, commit=300)).accounting}
    assert (found[3].state, found[3].policy_source) == ("gap", "evidenced")
    assert found[3].explanation.startswith(f"{said}: 100 definitely missed [0, 100)"), found[3].explanation


def test_a_start_from_record_timestamps_is_no_evidence():
    """by_duration may start anywhere from the log start up: a first start
    offset below the end before the pickup proves nothing of latest or earliest."""
    store = billing_store()
    store.apply(Step(0, 100, share=DURATION_SHARE).snapshot())
    changes = store.apply(Step(0, 200, owned=True, commit=40, share=DURATION_SHARE).snapshot(store.now))
    (accounting,) = changes.accounting
    assert (accounting.state, accounting.policy_source, accounting.missed_possible) == ("gap", "declared", 40)
    assert changes.policy_evidence == ()


@pytest.mark.parametrize("group_id", ["billing", "connect-s3-sink"])
def test_a_group_declared_read_uncommitted_is_judged_against_the_end_not_the_last_stable_offset(group_id):
    """A transaction was open at the pickup (last stable offset 60, end 100).
    The group declared read_uncommitted: a latest member starts at the end, so
    a first commit at 80 is below where latest starts: evidence of earliest.
    The same for a Connect sink's group, whose earliest is otherwise only assumed."""
    store = billing_store(isolation="read_uncommitted")
    store.groups = {group_id: KnownGroup(group_id, frozenset({"orders"}), "unknown", "read_uncommitted")}

    def seen(step: Step) -> Snapshot:
        snapshot = step.snapshot(store.now)
        (billing,) = snapshot.groups
        return replace(snapshot, groups=(replace(billing, group_id=group_id),))

    store.apply(seen(Step(0, 100, open_transaction_from=60)))
    changes = store.apply(seen(Step(0, 200, owned=True, commit=80)))
    (accounting,) = changes.accounting
    assert (accounting.state, accounting.policy_source) == ("covered", "evidenced")
    assert [(e.group_id, e.policy) for e in changes.policy_evidence] == [(group_id, "earliest")]


def test_every_group_that_proves_its_policy_in_one_poll_gets_it_recorded():
    """billing and audit both start below the end on partition 2; audit joined
    since the last full poll (no stored row): its evidence is recorded, and its
    partition 3 is decided by it in the same poll."""
    store = billing_store()

    def seen(offsets, parts) -> Snapshot:
        commits = {("orders", 0): 1000, ("orders", 1): 1000, **{("orders", p): c for p, c in parts.items()}}
        owns = (("orders", 0), ("orders", 1)) + tuple(("orders", p) for p in parts)
        return poll(topic("orders", (0, 1000), (0, 1000), *offsets, topic_id=ORDERS_ID),
                    groups=tuple(group(g, owns=owns, commits=commits) for g in ("audit", "billing")))

    store.apply(seen(((0, 100), (0, 100)), {}))
    changes = store.apply(seen(((0, 300), (0, 300)), {2: 40, 3: 300}))
    assert [(e.group_id, e.policy) for e in changes.policy_evidence] == [("audit", "earliest"), ("billing", "earliest")]
    found = {(a.key.group_id, a.key.partition): (a.state, a.policy_source) for a in changes.accounting}
    assert found[("audit", 3)] == found[("billing", 3)] == ("covered", "evidenced")


def test_a_share_group_whose_setting_was_not_read_speaks_of_start_offsets_under_evidence():
    _kind_story("queue", "share", None,
                {"queue": KnownGroup("queue", frozenset({"orders"}), evidenced_policy="earliest",
                                     policy_evidence="seen starting at earliest")},
                ("covered", "evidenced"), "seen starting at earliest; first start offset 160 cannot tell otherwise",
                "its stored evidence decides, and a share group's position is its start offset")


def test_a_likely_start_under_an_assumed_policy_stays_within_the_latest_bracket():
    """The estimate is of where a latest member started: inside [H_k, C_f]
    even though nothing is definite under the assumption."""
    store = billing_store()
    store.apply(Step(0, 100).snapshot())
    store.apply(Step(0, 150, owned=True).snapshot(store.now))
    changes = store.apply(Step(0, 200, owned=True, commit=180, likely_start=20).snapshot(store.now),
                          likely_starts={NEW_PARTITION: LikelyStart(20, "time index (CreateTime)")})
    (accounting,) = changes.accounting
    assert (accounting.missed_definite, accounting.missed_possible) == (0, 180)
    assert (accounting.missed_definite_if_latest, accounting.missed_possible_if_latest) == (100, 80)
    assert accounting.likely_start == 100, "raised to H_k, the floor of a latest start"


# --- A topic first seen already read (issue 41) -------------------------------


def _first_seen_payments(*, watching: bool, groups: tuple) -> Changes:
    store = billing_store()
    store.watching = watching
    return store.apply(poll(orders(2), topic("payments", (0, 50), (0, 50), (0, 50), (0, 50)),
                            groups=(billing_reading(0, 1), *groups)))


FIRST_SIGHT_CASES = [
    pytest.param(
        True, (group("ledger", owns=(("payments", 0), ("payments", 1), ("payments", 2)),
                     commits={("payments", 0): 50, ("payments", 1): 0}),),
        {(3, "pending")},
        "payments was created and raised before any observation stored it: its first sight shows ledger, live, "
        "neither holding nor committed on partition 3, which holds records: its clients do not know it yet, "
        "as with a partition added after their last refresh; pending, observed from now on. A commit proves "
        "nothing either way (a group reading since the topic's creation commits above its log start too), "
        "and partition 2, held without a commit, is a member that has read nothing there yet",
        id="first-sight-of-a-read-topic",
    ),
    pytest.param(
        True, (group("idle", commits={("payments", 0): 50}),), set(),
        "a group with commits and no member: nothing shows which partitions its clients know",
        id="first-sight-of-an-empty-group",
    ),
    pytest.param(
        False, (group("ledger", owns=(("payments", 0),), commits={("payments", 0): 50}),), set(),
        "the cluster's first poll: every topic is first seen, none is new; no findings",
        id="first-poll-is-no-first-sight",
    ),
    pytest.param(
        True, (), set(),
        "a new topic nobody reads yet: a new lineage, no findings (the watcher records it before readers come)",
        id="first-sight-of-an-unread-topic",
    ),
]


@pytest.mark.parametrize("watching, groups, expected, why", FIRST_SIGHT_CASES)
def test_a_topic_first_seen_already_read_gets_findings(watching, groups, expected, why):
    changes = _first_seen_payments(watching=watching, groups=groups)
    found = {(a.key.partition, a.state) for a in changes.accounting if a.key.topic == "payments"}
    assert found == expected, why
    for a in changes.accounting:
        if a.key.topic == "payments":
            assert (a.missed_definite, a.lag, a.pre_pickup_high_watermark) == (0, 50, 50), why


FIRST_SIGHT_WORDS = ("; the topic was first seen with this partition already read: no earlier generation was observed, "
                     "so whether it was added later and where the group started on it are not known")


def test_a_first_sight_finding_is_followed_like_any_other_and_says_what_it_cannot_know():
    """payments is first seen in the poll where orders grows (both topics
    change at once). ledger, live on payments, knows nothing of partition 3,
    which holds records, nor of partition 4, whose records retention deleted
    (it holds none: nothing to miss there). Partition 3's finding is then
    taken and decided as any other, and every verdict says what a first sight
    cannot know."""
    store = billing_store()
    ledger_reads = {("payments", 0): 50, ("payments", 1): 0}

    def seen(*, high: int, owns_3: bool = False, commit_3: int | None = None) -> Snapshot:
        owns = (("payments", 0), ("payments", 1), ("payments", 2)) + ((("payments", 3),) if owns_3 else ())
        commits = {**ledger_reads, **({("payments", 3): commit_3} if commit_3 is not None else {})}
        return poll(orders(3), topic("payments", (0, 50), (0, 50), (0, 50), (0, high), (50, 50)),
                    groups=(billing_reading(0, 1), group("ledger", owns=owns, commits=commits)))

    first = store.apply(seen(high=50))
    ledger_key = key(3, 1, group_id="ledger", topic_name="payments")
    assert first.new_findings == (key(2, 2), ledger_key), "orders' added partition, and payments' unknown one"
    found = {a.key: a for a in first.accounting}
    assert (found[ledger_key].created_at, found[ledger_key].polls_without_owner) == (T0, 1)
    assert found[ledger_key].first_sight and not found[key(2, 2)].first_sight

    taken = {a.key: a for a in store.apply(seen(high=70, owns_3=True)).accounting}[ledger_key]
    assert taken.state == "undecided" and taken.explanation.endswith(FIRST_SIGHT_WORDS), taken.explanation

    decided = {a.key: a for a in store.apply(seen(high=90, owns_3=True, commit_3=60)).accounting}[ledger_key]
    assert (decided.state, decided.missed_possible, decided.first_sight) == ("gap", 60, True)
    assert decided.explanation.endswith(FIRST_SIGHT_WORDS), decided.explanation
