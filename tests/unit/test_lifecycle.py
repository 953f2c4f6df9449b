"""The end of a finding's lifecycle, pure: what a verified job recovered
(groups.domain.lifecycle) and how the core treats closed and fully expired
findings (groups.domain.detection). Each case says why its answer is right."""

from __future__ import annotations

from dataclasses import replace

import pytest

from groups.domain.lifecycle import backfill_recovery, reset_recovery, sink_description
from tests.unit.core_stories import NEW_PARTITION, Step, billing_reading, billing_store, key, orders, poll

RESET_CASES = [
    pytest.param(
        dict(before=150, after=0, missed_start=0, missed_end=150), (150, 150, True),
        "reset from its commit 150 to 0: it reads [0,150) again, all of it the missed range",
        id="earliest-over-the-whole-gap",
    ),
    pytest.param(
        dict(before=400, after=0, missed_start=0, missed_end=150), (150, 400, True),
        "the group had read on to 400: 400 messages come again, only [0,150) were missed",
        id="re-delivers-more-than-it-recovers",
    ),
    pytest.param(
        dict(before=400, after=120, missed_start=120, missed_end=150), (30, 280, True),
        "retention took [0,120): the reset starts at the log start 120, recovering the 30 still stored",
        id="after-partial-expiry",
    ),
    pytest.param(
        dict(before=None, after=0, missed_start=0, missed_end=0), (0, 0, True),
        "before pickup (auto-repair): no commit, nothing missed yet, nothing read twice; the group will read "
        "everything from the log start: complete",
        id="before-pickup",
    ),
    pytest.param(
        dict(before=400, after=200, missed_start=0, missed_end=150), (0, 200, False),
        "a reset to 200 is above the missed range: 200 duplicates, nothing recovered, not a full repair",
        id="above-the-gap",
    ),
    pytest.param(
        dict(before=100, after=0, missed_start=0, missed_end=150), (100, 100, True),
        "the commit 100 is inside the missed range: the group will read [100,150) anyway, only [0,100) "
        "is read because of the reset",
        id="commit-inside-the-gap",
    ),
    pytest.param(
        dict(before=150, after=150, missed_start=0, missed_end=150), (0, 0, False),
        "a reset to the very offset it had committed moves nothing: nothing read twice, nothing recovered, "
        "[0,150) still missed",
        id="reset-to-its-own-commit",
    ),
    pytest.param(
        dict(before=None, after=0, missed_start=0, missed_end=150), (150, 0, True),
        "the commit is gone (offsets expired) but the missed range is known: from 0 the group reads [0,150) "
        "once, for the first time",
        id="no-commit-with-a-known-gap",
    ),
    pytest.param(
        dict(before=400, after=0, missed_start=0, missed_end=None), (0, 400, True),
        "a missed range with no known end counts nothing as recovered (400 duplicates), but the group reads "
        "on from the start of it, so the whole range is covered whatever its end",
        id="gap-end-unknown",
    ),
    pytest.param(
        dict(before=400, after=41, missed_start=0, missed_end=43), (2, 359, False),
        "a reset to the likely start 41 recovers [41,43) and leaves [0,41) uncovered: repaired to an estimate",
        id="reset-above-the-missed-start",
    ),
]


@pytest.mark.parametrize(("offsets", "expected", "why"), RESET_CASES)
def test_a_reset_counts_what_it_recovers_and_what_it_re_delivers(offsets, expected, why):
    recovery = reset_recovery(job_id=7, **offsets)

    assert (recovery.recovered, recovery.redelivered, recovery.complete) == expected, why
    how = "repaired" if recovery.complete else "repaired to an estimate"
    assert recovery.reason.startswith(f"{how} by reset job 7: offsets reset to {offsets['after']}")


RESET_REASON_CASES = [
    pytest.param(
        dict(before=52, after=0, missed_start=0, missed_end=52),
        "repaired by reset job 3: offsets reset to 0 (committed was 52); "
        "52 messages re-delivered, 52 of them missed before",
        "a commit before: how many come again, and how many of those the group had missed",
        id="with-a-commit",
    ),
    pytest.param(
        dict(before=90, after=30, missed_start=0, missed_end=60),
        "repaired to an estimate by reset job 3: offsets reset to 30 (committed was 90); the missed range "
        "from 0 to 30 is not covered; 60 messages re-delivered, 30 of them missed before",
        "a reset above the start of the sound range says what it leaves uncovered",
        id="partial-reset",
    ),
    pytest.param(
        dict(before=None, after=0, missed_start=0, missed_end=150),
        "repaired by reset job 3: offsets reset to 0 (no commit); 150 missed messages delivered",
        "no commit before: nothing comes again, so only the missed messages now delivered are named",
        id="no-commit-recovers-the-gap",
    ),
    pytest.param(
        dict(before=None, after=0, missed_start=0, missed_end=0),
        "repaired by reset job 3: offsets reset to 0 (no commit)",
        "no commit and nothing missed (auto-repair before pickup): only where the group starts",
        id="no-commit-nothing-missed",
    ),
]


@pytest.mark.parametrize(("offsets", "reason", "why"), RESET_REASON_CASES)
def test_a_reset_reason_names_where_and_how_much(offsets, reason, why):
    assert reset_recovery(job_id=3, **offsets).reason == reason, why


FULL = dict(planned=(0, 60), sound=(0, 60))

BACKFILL_CASES = [
    pytest.param(
        {"expected": 60, "delivered": 55, "explained": {"retention": 5}}, FULL, True,
        "repaired by backfill job 12: 55 of 60 records replayed to parquet at /data/12; 5 retention",
        "retention took 5 before the job read them: the reason says so",
        id="one-explained-loss",
    ),
    pytest.param(
        {"expected": 60, "delivered": 52, "explained": {"retention": 5, "aborted_transaction": 3}}, FULL, True,
        "repaired by backfill job 12: 52 of 60 records replayed to parquet at /data/12; "
        "3 aborted transaction, 5 retention",
        "every cause is named, in words, in a fixed (alphabetical) order",
        id="several-explained-losses",
    ),
    pytest.param(
        {"expected": 60, "delivered": 60, "explained": {}}, FULL, True,
        "repaired by backfill job 12: 60 of 60 records replayed to parquet at /data/12",
        "nothing missing: no list of causes",
        id="all-delivered",
    ),
    pytest.param(
        {"expected": 41, "delivered": 41, "explained": {}}, dict(planned=(0, 41), sound=(0, 43)), False,
        "repaired to an estimate by backfill job 12: 41 of 41 records replayed to parquet at /data/12; "
        "[41, 43) possibly missed and not covered",
        "ended at the likely start 41 while the first commit 43 bounds the loss: the two records in between "
        "may be lost, so it is not called a full repair (the issue's first row)",
        id="likely-start-leaves-part-of-the-bound",
    ),
    pytest.param(
        {"expected": 70, "delivered": 70, "explained": {}}, dict(planned=(0, 70), sound=(0, 60)), True,
        "repaired by backfill job 12: 70 of 70 records replayed to parquet at /data/12",
        "planned to the current end 70 while undecided; the first commit 60 came meanwhile: covered",
        id="current-end-past-the-bound-that-came-later",
    ),
    pytest.param(
        {"expected": 70, "delivered": 70, "explained": {}}, dict(planned=(0, 70), sound=(0, None)), False,
        "repaired to an estimate by backfill job 12: 70 of 70 records replayed to parquet at /data/12; "
        "the group had not committed, so nothing bounds what it skipped from 70 on",
        "still no first commit when the job finished: nothing proves the range covers where it started",
        id="no-bound-yet",
    ),
    pytest.param(
        {"expected": 50, "delivered": 50, "explained": {}}, dict(planned=(10, 60), sound=(0, 60)), False,
        "repaired to an estimate by backfill job 12: 50 of 50 records replayed to parquet at /data/12; "
        "[0, 10) missed and not covered",
        "a range that starts after the sound start does not cover it",
        id="starts-too-late",
    ),
]


@pytest.mark.parametrize(("counts", "ranges", "complete", "reason", "why"), BACKFILL_CASES)
def test_a_backfill_recovers_what_it_delivered_and_names_explained_losses(counts, ranges, complete, reason, why):
    report = {"topic": "orders", "partition": 2, **counts}

    recovery = backfill_recovery(job_id=12, partition_report=report, destination="parquet at /data/12", **ranges)

    assert (recovery.recovered, recovery.redelivered) == (counts["delivered"], None), "a backfill never moves the group"
    assert recovery.complete is complete, why
    assert recovery.reason == reason, why


SINK_CASES = [
    pytest.param(
        {"kind": "kafka", "topics": {"orders": "replay.b", "payments": "replay.b", "refunds": "replay.a"}},
        "Kafka topic replay.a, replay.b",
        "two sources replayed into one topic (the group's configured one) name it once; names sorted",
        id="kafka-names-each-replay-topic-once",
    ),
    pytest.param(
        {"kind": "handler", "handler": "billing.replay.handle"}, "handler billing.replay.handle",
        "a handler is named by its dotted path",
        id="handler",
    ),
    pytest.param(
        {"kind": "parquet", "output": "/data/backfills/12"}, "parquet at /data/backfills/12",
        "parquet is named by where the files were published",
        id="parquet",
    ),
    pytest.param(
        {"kind": "kafka"}, "Kafka topic (not recorded)",
        "a result written before the sink was built (the job failed early) has only the kind: no topic is made up",
        id="kafka-kind-only",
    ),
    pytest.param(
        {"kind": "handler"}, "handler (not recorded)", "the same for a handler: never 'None' nor blank", id="handler-kind-only",
    ),
    pytest.param(
        {"kind": "parquet"}, "parquet (not recorded)", "the same for parquet: never 'None' nor blank", id="parquet-kind-only",
    ),
    pytest.param({}, "an unknown sink", "no kind at all", id="no-kind"),
    pytest.param({"kind": "s3", "output": "s3://x"}, "an unknown sink", "a kind this version does not know",
                 id="unknown-kind"),
]


@pytest.mark.parametrize(("sink", "description", "why"), SINK_CASES)
def test_a_sink_is_described_in_words(sink, description, why):
    assert sink_description(sink) == description, why


# --- The core and closed findings --------------------------------------------


def test_a_closed_finding_is_neither_accounted_nor_created_again():
    """A repaired finding handed to the core (closed) with the very key the
    snapshot would open must stay closed: the poll would otherwise reopen it,
    or fail on the unique constraint."""
    store = billing_store()
    store.findings[NEW_PARTITION] = replace(_state_after_one_poll(), closed=True)

    changes = store.apply(Step(0, 100).snapshot())

    assert changes.new_findings == ()
    assert changes.accounting == () and changes.transitions == ()


def test_a_new_generation_still_opens_findings_beside_a_closed_one():
    store = billing_store()
    store.findings[NEW_PARTITION] = replace(_state_after_one_poll(), closed=True)
    store.topics["orders"] = replace(store.topics["orders"], generation=2, partition_ids=frozenset({0, 1, 2}))

    changes = store.apply(poll(orders(4), groups=(billing_reading(0, 1, 2),)))

    assert changes.new_findings == (key(3, 3),), "partition 3 of generation 3 is new"
    assert [a.key for a in changes.accounting] == [key(3, 3)]


def test_only_a_finding_whose_whole_missed_range_expired_is_listed_to_close():
    store = billing_store(policy="latest")
    for step in (Step(0, 100), Step(0, 150, owned=True, commit=150)):
        store.apply(step.snapshot())

    partly = store.apply(Step(120, 400, owned=True, commit=390).snapshot())
    assert partly.expired_findings == (), "[120,150) can still be replayed: the finding stays open"

    whole = store.apply(Step(200, 500, owned=True, commit=490).snapshot())
    assert whole.expired_findings == (NEW_PARTITION,), "retention passed 150: nothing left to repair"


def _state_after_one_poll():
    store = billing_store()
    store.apply(Step(0, 100).snapshot())
    return store.findings[NEW_PARTITION]
