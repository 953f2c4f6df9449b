"""Table-driven tests of reset planning: each case says why its answer is right.

Partition ``orders[2]`` holds offsets [10, 50): log start 10, high watermark
50. Offsets mean "the next message to read".
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from groups.domain.planning import (
    BackfillRange,
    PartitionPosition,
    PlanError,
    PlannedReset,
    ResetTarget,
    MissedRange,
    PlannedBackfill,
    backfill_recommended,
    plan_backfill,
    plan_backfill_of_findings,
    plan_reset,
    reset_drift,
    reset_mismatches,
)

NOW_MS = 1_750_000_000_000


def position(committed: int | None, *, log_start: int = 10, high_watermark: int = 50, partition: int = 2):
    return PartitionPosition(topic="orders", partition=partition, log_start=log_start,
                             high_watermark=high_watermark, committed=committed)


@dataclass(frozen=True)
class Case:
    name: str
    why: str
    target: ResetTarget
    committed: int | None
    planned: int
    clamped: bool
    redelivered: int
    skipped: int
    at_time: int | None = None


CASES = [
    Case("earliest from a commit", "earliest is the log start; the 30 messages in [10, 40) are read again",
         ResetTarget("earliest"), 40, 10, False, 30, 0),
    Case("earliest without a commit", "nothing was read: nothing is re-delivered, the group starts at 10",
         ResetTarget("earliest"), None, 10, False, 0, 0),
    Case("offset inside the log", "offset 45 is kept; [40, 45) is skipped", ResetTarget("offset", 45), 40,
         45, False, 0, 5),
    Case("offset below the log start", "offset 3 no longer exists: clamped up to the log start, like Kafka's tool",
         ResetTarget("offset", 3), 40, 10, True, 30, 0),
    Case("offset above the high watermark", "offset 999 does not exist yet: clamped down to the end, and shown",
         ResetTarget("offset", 999), 40, 50, True, 0, 10),
    Case("offset at the high watermark", "50 is the next offset to be written: a valid position, not a clamp",
         ResetTarget("offset", 50), 40, 50, False, 0, 10),
    Case("shift back", "shift -15 from the commit 40 is 25", ResetTarget("shift", -15), 40, 25, False, 15, 0),
    Case("shift forward past the end", "40 + 100 is beyond the end: clamped to 50", ResetTarget("shift", 100), 40,
         50, True, 0, 10),
    Case("shift back past the log start", "40 - 100 is below the log start: clamped to 10",
         ResetTarget("shift", -100), 40, 10, True, 30, 0),
    Case("shift without a commit", "with no commit the shift starts from the log start: 10 + 5",
         ResetTarget("shift", 5), None, 15, False, 0, 0),
    Case("timestamp found", "the broker's first offset at or after the time is 30", ResetTarget("timestamp", 1), 40,
         30, False, 10, 0, at_time=30),
    Case("timestamp after the last message", "no message is that recent: the end", ResetTarget("timestamp", 1),
         40, 50, False, 0, 10, at_time=None),
    Case("planned equals current", "a reset to where the group already is moves nothing",
         ResetTarget("offset", 40), 40, 40, False, 0, 0),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_it_plans_each_target_clamped_to_the_log(case: Case):
    at_time = {("orders", 2): case.at_time} if case.target.kind == "timestamp" else None
    [plan] = plan_reset(target=case.target, positions=[position(case.committed)], timestamp_offsets=at_time)
    assert (plan.planned, plan.clamped, plan.redelivered, plan.skipped) == (
        case.planned, case.clamped, case.redelivered, case.skipped
    ), case.why
    assert plan.current == case.committed
    assert ("clamped" in plan.note) == case.clamped


def test_it_says_where_a_partition_without_a_commit_will_start():
    [plan] = plan_reset(target=ResetTarget("earliest"), positions=[position(None)])
    assert "no committed offset" in plan.note


def test_it_sorts_partitions_and_plans_each_from_its_own_log():
    plans = plan_reset(target=ResetTarget("earliest"), positions=[
        position(7, partition=3, log_start=5, high_watermark=9), position(None, partition=1, log_start=0,
                                                                          high_watermark=0),
    ])
    assert [(p.partition, p.planned, p.redelivered) for p in plans] == [(1, 0, 0), (3, 5, 2)]


def test_an_empty_partition_can_only_be_reset_to_zero():
    # Log start = high watermark = 0: the only valid position; a commit there
    # still matters, since a `latest` group would otherwise start wherever the end is later.
    [plan] = plan_reset(target=ResetTarget("offset", 5), positions=[position(None, log_start=0, high_watermark=0)])
    assert (plan.planned, plan.clamped) == (0, True)


def test_a_timestamp_target_needs_the_broker_answer():
    with pytest.raises(PlanError, match="resolved against the broker"):
        plan_reset(target=ResetTarget("timestamp", 1), positions=[position(40)])


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("offset", -1, "must not be negative"),  # a negative offset is a sentinel in Kafka, never a position
        ("offset", "", "an offset reset needs a value"),
        ("offset", "ten", "whole number"),
        ("timestamp", -5, "must not be negative"),
        ("shift", None, "a shift reset needs a value"),
        ("timestamp", "", "a timestamp reset needs a value"),
        ("latest", None, "unknown reset target"),  # not offered: it is what causes the gap
        ("offset", 2.7, "whole number"),  # a fraction is not an offset (int() would truncate it to 2)
        ("offset", True, "whole number"),  # a boolean is an int in Python, never an offset
        ("shift", float("inf"), "whole number"),  # JSON 1e400: int() would raise OverflowError
        ("timestamp", float("-inf"), "whole number"),
        ("offset", "2.7", "whole number"),
        ("timestamp", "yesterday", "not an ISO 8601 date-time"),
        ("timestamp", "2026-13-01T00:00:00Z", "not an ISO 8601 date-time"),
        ("timestamp", "-5", "timestamp must not be negative, got -5"),  # a negative number as text is a number
        # A mistyped number is not read as a whole number with its letters dropped: the message names both forms.
        ("timestamp", "X1795592640000", r"^'X1795592640000' is not an ISO 8601 date-time \(like "
         r"2026-11-25T07:44:00Z\) or epoch milliseconds$"),
        ("offset", "2026-11-25T07:44:00Z", "whole number"),  # only a time may be a date-time
        ("offset", ["1"], "whole number"),
    ],
)
def test_it_refuses_bad_targets(kind, value, message):
    with pytest.raises(PlanError, match=message):
        ResetTarget.parse(kind=kind, value=value)


def test_a_negative_shift_is_a_valid_target():
    assert ResetTarget.parse(kind="shift", value="-3") == ResetTarget("shift", -3)


@pytest.mark.parametrize(
    ("value", "refused"),
    [(NOW_MS + 1, True), (NOW_MS, False), (NOW_MS - 60_000, False)],
    ids=["one ms ahead: no message can be that recent", "now is fine", "a minute ago is fine"],
)
def test_it_refuses_a_timestamp_in_the_future(value, refused):
    target = ResetTarget("timestamp", value)
    if refused:
        with pytest.raises(PlanError, match="in the future"):
            target.require_not_future(now_ms=NOW_MS)
    else:
        target.require_not_future(now_ms=NOW_MS)


def test_only_timestamps_are_checked_against_now():
    ResetTarget("offset", NOW_MS * 10).require_not_future(now_ms=NOW_MS)


def planned(current: int | None, target: int, partition: int = 2) -> PlannedReset:
    return PlannedReset(topic="orders", partition=partition, log_start=0, high_watermark=100, current=current,
                        planned=target, clamped=False, redelivered=0, skipped=0, note="")


@pytest.mark.parametrize(
    ("current", "target", "committed_now", "moved"),
    [
        (40, 10, 40, False),  # untouched since the plan
        (40, 10, 10, False),  # already at the plan: an earlier attempt of this job applied it
        (40, 10, 55, True),  # the group (or someone) committed past the plan: never overwrite
        (None, 0, None, False),  # still no commit, as planned
        (None, 0, 12, True),  # a consumer started and committed since the plan
        (40, 10, None, True),  # the group's offsets were deleted since the plan
    ],
)
def test_it_reports_offsets_moved_since_the_plan(current, target, committed_now, moved):
    lines = reset_drift(plan=[planned(current, target)], committed={("orders", 2): committed_now})
    assert bool(lines) == moved
    if moved:
        assert lines[0].startswith("orders[2] was ")


def test_drift_names_each_moved_partition_and_how():
    lines = reset_drift(plan=[planned(None, 0, 1), planned(7, 0, 2)], committed={("orders", 1): 3, ("orders", 2): 7})
    assert lines == ["orders[1] was no commit when planned, now 3"]


@pytest.mark.parametrize(
    ("committed", "mismatches"),
    [
        ({("orders", 1): 0, ("orders", 2): 5}, []),  # read back equal: the reset is done
        ({("orders", 1): 0, ("orders", 2): 6}, ["orders[2] reads back 6, planned 5"]),
        ({("orders", 1): None, ("orders", 2): 5}, ["orders[1] reads back no commit, planned 0"]),
        ({("orders", 2): 5}, ["orders[1] reads back no commit, planned 0"]),  # no answer is not success
    ],
)
def test_a_reset_is_done_only_when_read_back_equal_to_the_plan(committed, mismatches):
    assert reset_mismatches(plan=[planned(None, 0, 1), planned(9, 5, 2)], committed=committed) == mismatches


@pytest.mark.parametrize(
    ("redelivered", "missed_at_most", "recommended", "why"),
    [
        (1034, 73, True, "the demo: 14 times the loss and 961 records more"),
        (730, 73, False, "exactly 10 times the loss is not more than 10 times"),
        (731, 73, True, "just over 10 times, and 658 records more"),
        (100, 5, False, "20 times the loss, but only 95 records more: cheaper than a Spark job"),
        (106, 5, True, "over 10 times and 101 records more"),
        (105, 5, False, "exactly 100 records more is not over the margin"),
        (500, 0, False, "nothing was missed: there is nothing to backfill"),
        (0, 0, False, "nothing re-delivered and nothing missed"),
        (0, 73, False, "a reset that re-delivers nothing (a timestamp target, or a forward one) costs nothing"),
        (60, 73, False, "re-delivering less than was missed cannot be far more"),
        (5000, 600, False, "8 times the loss: the reset's duplicates are comparable to it"),
        (500, 1, True, "one missed record is still a loss: 500 duplicates to recover it is far more"),
    ],
)
def test_it_recommends_a_backfill_only_when_a_reset_redelivers_far_more_than_was_missed(
    redelivered, missed_at_most, recommended, why
):
    assert backfill_recommended(redelivered=redelivered, missed_at_most=missed_at_most) is recommended, why


def test_a_plan_survives_its_json_form():
    [plan] = plan_reset(target=ResetTarget("offset", 999), positions=[position(40)])
    assert PlannedReset.from_dict(plan.as_dict()) == plan


@pytest.mark.parametrize(
    ("kind", "value", "target", "why"),
    [
        ("earliest", None, ResetTarget("earliest"), "earliest needs no value"),
        ("offset", "0", ResetTarget("offset", 0), "offset 0 is the first offset of a partition, a valid position"),
        ("timestamp", 0, ResetTarget("timestamp", 0), "timestamp 0 (the epoch) is a valid, if early, instant"),
        ("shift", 4, ResetTarget("shift", 4), "a shift forward"),
        ("timestamp", "2026-11-25T07:44:00Z", ResetTarget("timestamp", 1_795_592_640_000),
         "an ISO 8601 date-time is read as epoch milliseconds"),
        ("timestamp", "2026-11-25 08:44:00.250+01:00", ResetTarget("timestamp", 1_795_592_640_250),
         "its zone is honoured, and so are its milliseconds"),
        ("timestamp", "2026-11-25T07:44", ResetTarget("timestamp", 1_795_592_640_000),
         "without a zone it is UTC, the zone every page shows (as the CLI's --to-datetime)"),
        ("timestamp", "1795592640000", ResetTarget("timestamp", 1_795_592_640_000), "epoch milliseconds as text"),
    ],
)
def test_it_parses_each_valid_target(kind, value, target, why):
    assert ResetTarget.parse(kind=kind, value=value) == target, why


def test_a_timestamp_target_without_broker_answer_says_why_exactly():
    with pytest.raises(PlanError) as refused:
        plan_reset(target=ResetTarget("timestamp", 1), positions=[position(40)])
    assert str(refused.value) == "a timestamp reset is resolved against the broker when the job runs"


@pytest.mark.parametrize(
    ("target", "committed", "note", "why"),
    [
        (ResetTarget("offset", 20), 40, "", "a commit and a target inside the log: nothing to say"),
        (ResetTarget("offset", 20), None,
         "no committed offset: the group will start here instead of applying auto.offset.reset",
         "without a commit the reset decides where the group starts"),
        (ResetTarget("offset", 999), 40,
         "requested 999 is outside [10, 50] (log start, high watermark): clamped to 50",
         "a clamp is reported with both bounds"),
        (ResetTarget("offset", 3), None,
         "requested 3 is outside [10, 50] (log start, high watermark): clamped to 10; no committed offset: the "
         "group will start here instead of applying auto.offset.reset",
         "a clamp and no commit: both are said"),
    ],
)
def test_each_plan_says_exactly_what_the_operator_must_know(target, committed, note, why):
    [plan] = plan_reset(target=target, positions=[position(committed)])
    assert plan.note == note, why


def test_a_plan_carries_the_partition_and_its_log_bounds():
    [plan] = plan_reset(target=ResetTarget("offset", 30), positions=[position(40)])
    assert plan == PlannedReset(topic="orders", partition=2, log_start=10, high_watermark=50, current=40,
                                planned=30, clamped=False, redelivered=10, skipped=0, note="")


def test_drift_shows_the_offset_at_planning_time():
    assert reset_drift(plan=[planned(7, 0, 2)], committed={("orders", 2): 9}) == [
        "orders[2] was 7 when planned, now 9"
    ]


@pytest.mark.parametrize(
    ("ranges", "expected", "why"),
    [
        ([("orders", 3, 5, 9), ("orders", 1, 0, 4), ("audit", 0, 2, 3)],
         [BackfillRange("audit", 0, 2, 3), BackfillRange("orders", 1, 0, 4), BackfillRange("orders", 3, 5, 9)],
         "ranges are planned in (topic, partition) order"),
        ([("orders", 0, 0, 1)], [BackfillRange("orders", 0, 0, 1)], "one offset is a range"),
        ([("orders", 0, 0, 4), ("audit", 5, 0, 4)], [BackfillRange("audit", 5, 0, 4), BackfillRange("orders", 0, 0, 4)],
         "topic first, then partition"),
        ([("orders", 3, 5, 9), ("orders", 1, 9, 12)],
         [BackfillRange("orders", 1, 9, 12), BackfillRange("orders", 3, 5, 9)], "by partition, not by start"),
    ],
)
def test_it_plans_backfill_ranges(ranges, expected, why):
    assert plan_backfill(ranges=ranges) == expected, why


@pytest.mark.parametrize(
    ("ranges", "message", "why"),
    [
        ([("orders", 2, None, 10)], "orders[2]: the missed range is not known yet (the group has not committed)",
         "no start: the finding is not decided"),
        ([("orders", 2, 0, None)], "orders[2]: the missed range is not known yet (the group has not committed)",
         "no end: the group has not committed"),
        ([("orders", 2, -1, 10)], "orders[2]: nothing to backfill in [-1, 10)", "offsets are never negative"),
        ([("orders", 2, 10, 10)], "orders[2]: nothing to backfill in [10, 10)", "an empty range"),
        ([("orders", 2, 10, 5)], "orders[2]: nothing to backfill in [10, 5)", "a reversed range"),
    ],
)
def test_it_refuses_unknown_or_empty_backfill_ranges(ranges, message, why):
    with pytest.raises(PlanError) as refused:
        plan_backfill(ranges=ranges)
    assert str(refused.value) == message, why


def test_a_backfill_range_counts_its_offsets_in_its_json_form():
    assert BackfillRange("orders", 2, 10, 25).as_dict() == {
        "topic": "orders", "partition": 2, "start": 10, "end": 25, "count": 15
    }


def missed(**fields) -> MissedRange:
    """orders[2]: a gap, [0, 40) definitely missed, first commit 43, likely start 41, end 90."""
    return MissedRange(**{"topic": "orders", "partition": 2, "state": "gap", "start": 0, "definite_end": 40,
                          "bound_end": 43, "likely_start": 41, "high_watermark": 90, **fields})


@pytest.mark.parametrize(
    ("finding", "until", "expected", "why"),
    [
        (missed(), "bound", (0, 43, 40, 3, "first commit (a bound)"),
         "the default ends at the first commit, the sound bound: 40 certain losses, 3 the group may have read"),
        (missed(), "likely", (0, 41, 40, 1, "likely start (an estimate)"),
         "the operator may end at the likely start: 2 fewer possible duplicates, and possibly 2 not covered"),
        (missed(start=25), "bound", (25, 43, 15, 3, "first commit (a bound)"),
         "retention took [0,25): the plan starts at the first stored offset, certain losses counted from it"),
        (missed(state="undecided", bound_end=None), "bound", (0, 90, 40, 50, "current end (no commit yet, so no bound)"),
         "taken without a commit: no bound, so the default runs to the current end; all past H_k may be duplicates"),
        (missed(definite_end=0, bound_end=70, likely_start=None), "bound", (0, 70, 0, 70, "first commit (a bound)"),
         "owned at the first observation: nothing definite, everything up to the first commit possible"),
        (missed(likely_start=40), "likely", (0, 40, 40, 0, "likely start (an estimate)"),
         "a likely start at H_k: only certain losses are planned"),
    ],
)
def test_a_backfill_of_findings_ends_at_the_bound_unless_told_otherwise(finding, until, expected, why):
    (planned,) = plan_backfill_of_findings(missed=[finding], until=until)
    start, end, definite, possible, basis = expected
    assert planned == PlannedBackfill(BackfillRange("orders", 2, start, end), definite, possible, basis), why
    assert planned.as_dict() == {"topic": "orders", "partition": 2, "start": start, "end": end,
                                 "count": end - start, "definite": definite, "possible": possible, "basis": basis}


@pytest.mark.parametrize(
    ("finding", "until", "message", "why"),
    [
        (missed(state="pending", bound_end=None, likely_start=None), "bound",
         "orders[2]: nobody has taken the partition yet, so a backfill now cannot cover what the group will skip "
         "when it does; reset it to earliest while the group is empty, or wait",
         "pending: the group will start wherever it starts later, so no backfill can be planned now"),
        (missed(state="unowned", bound_end=None, likely_start=None), "bound",
         "orders[2]: nobody has taken the partition yet, so a backfill now cannot cover what the group will skip "
         "when it does; reset it to earliest while the group is empty, or wait",
         "unowned: the same"),
        (missed(state="covered", bound_end=None), "bound",
         "orders[2]: nothing to backfill (covered: no missed range is left to replay)", "covered: nothing missed"),
        (missed(likely_start=None), "likely", "orders[2]: no likely start is known; backfill to the bound instead",
         "the estimate is not resolved yet"),
        (missed(), "latest", "unknown range end 'latest': use bound or likely", "only bound or likely"),
        (missed(start=43), "bound", "orders[2]: nothing to backfill in [43, 43)", "retention took all of it"),
    ],
)
def test_a_backfill_of_findings_is_refused_with_the_reason(finding, until, message, why):
    with pytest.raises(PlanError) as refused:
        plan_backfill_of_findings(missed=[finding], until=until)
    assert str(refused.value) == message, why


def test_a_backfill_of_findings_is_planned_in_topic_and_partition_order():
    planned = plan_backfill_of_findings(missed=[missed(partition=3), missed(topic="audit"), missed(partition=1)])
    assert [(p.range.topic, p.range.partition) for p in planned] == [("audit", 2), ("orders", 1), ("orders", 3)]


def test_a_negative_partition_is_no_backfill_range():
    """Kafka numbers partitions from 0: the planner, the command line and the
    Spark job's spec share this rule (``backfill_range_problem``)."""
    with pytest.raises(PlanError) as refused:
        plan_backfill(ranges=[("orders", -1, 0, 10)])
    assert str(refused.value) == "orders[-1]: partition -1 does not exist: partitions are never negative"


def test_a_date_time_without_a_zone_is_utc_whatever_the_machines_zone(monkeypatch):
    """The pages show UTC: a worker in another local zone must read the same instant."""
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert ResetTarget.parse(kind="timestamp", value="2026-11-25T07:44") == ResetTarget("timestamp",
                                                                                           1_795_592_640_000)
    finally:
        monkeypatch.undo()
        time.tzset()
