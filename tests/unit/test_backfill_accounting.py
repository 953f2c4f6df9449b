"""The pure accounting of a backfill's result (groups.domain.backfill):
which cause explains which missing offsets, one partition's report, the
job's summary. Each case says why its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.backfill import (
    MISSING_RANGES_LISTED,
    PreparedRange,
    _merged,
    _subtract,
    explain_missing,
    partition_report,
    records_in,
    report_explained,
    summary_line,
)
from groups.domain.planning import BackfillRange


@pytest.mark.parametrize(
    ("holes", "log_start", "committed", "uncommitted", "compacted", "expected", "why"),
    [
        ([(0, 10)], 10, [], [], False, [(0, 10, "retention")],
         "everything below the log start read after the job is gone for good"),
        ([(5, 15)], 10, [], [], False, [(5, 10, "retention"), (10, 15, "transaction_markers")],
         "a hole across the log start splits; above it, invisible to both readers on a delete-only topic"),
        ([(20, 25)], 0, [], [(20, 25)], False, [(20, 25, "aborted_transaction")],
         "readable only with read_uncommitted: records of an aborted transaction"),
        ([(20, 25)], 0, [(22, 23)], [(20, 25)], False,
         [(20, 22, "aborted_transaction"), (22, 23, "not_delivered"), (23, 25, "aborted_transaction")],
         "a committed record a reader sees now but the sink lacks is never explained"),
        ([(7, 8)], 0, [], [], True, [(7, 8, "compaction_or_markers")],
         "on a compacted topic a client cannot tell a compacted record from a marker"),
        ([], 100, [], [], False, [], "nothing missing, nothing to explain"),
    ],
)
def test_it_labels_missing_offsets(holes, log_start, committed, uncommitted, compacted, expected, why):
    assert explain_missing(holes=holes, log_start=log_start, committed_runs=committed,
                           uncommitted_runs=uncommitted, compacted=compacted) == expected, why


def test_it_counts_an_unexplained_difference_as_a_problem():
    prepared = PreparedRange(BackfillRange("orders", 2, 0, 100), log_start=10, high_watermark=120)
    summary = {"delivered": 85, "duplicates": 0, "outside_range": 0, "missing": 5, "holes": [[40, 45]],
               "holes_truncated": False}
    report = partition_report(prepared, summary, log_start_after=10, labelled=[(40, 45, "not_delivered")],
                              records=90)
    assert (report["expected"], report["offsets"]) == (90, 100)
    assert report["explained"] == {"retention": 10}  # [0, 10) was below the log start before the job
    assert report["unexplained"] == 5
    assert report["problems"] == ["5 offsets readable now were not delivered"]


@pytest.mark.parametrize(
    ("holes", "log_start", "committed", "expected", "why"),
    [
        ([(10, 15)], 10, [], [(10, 15, "transaction_markers")],
         "a hole starting exactly at the log start has nothing below it: no empty retention range"),
        ([(5, 10)], 10, [(5, 15)], [(5, 10, "retention")],
         "a hole ending exactly at the log start is all retention: nothing above it to label"),
        ([(10, 20)], 0, [(5, 10)], [(10, 20, "transaction_markers")],
         "a readable run ending where the hole starts covers none of it"),
        ([(10, 20)], 0, [(20, 25)], [(10, 20, "transaction_markers")],
         "a readable run starting where the hole ends covers none of it"),
        ([(10, 20)], 0, [(0, 5), (12, 15)],
         [(10, 12, "transaction_markers"), (12, 15, "not_delivered"), (15, 20, "transaction_markers")],
         "a run before the hole is passed over, not the end of the search"),
        ([(10, 20), (30, 40)], 0, [(15, 35)],
         [(10, 15, "transaction_markers"), (15, 20, "not_delivered"), (30, 35, "not_delivered"),
          (35, 40, "transaction_markers")],
         "one readable run across two holes covers the part of each it spans"),
    ],
)
def test_it_labels_the_edges_of_holes_and_runs(holes, log_start, committed, expected, why):
    assert explain_missing(holes=holes, log_start=log_start, committed_runs=committed) == expected, why


def test_a_topic_is_not_compacted_unless_said():
    assert explain_missing(holes=[(7, 8)], log_start=0) == [(7, 8, "transaction_markers")]


def test_it_accounts_every_offset_of_a_partition_exactly():
    # Planned [100, 200); the log start was 110 before the job, so Spark read [110, 200): 90 offsets.
    # 60 delivered, 30 missing, of which only the first holes [110, 130) are listed (20): 10 unlisted.
    prepared = PreparedRange(BackfillRange("orders", 2, 100, 200), log_start=110, high_watermark=250)
    summary = {"delivered": 60, "duplicates": 2, "outside_range": 1, "missing": 30, "holes": [[110, 130]],
               "holes_truncated": True}
    labelled = [(110, 115, "retention"), (115, 120, "not_delivered"), (120, 123, "not_delivered"),
                (123, 125, "transaction_markers"), (125, 130, "aborted_transaction")]

    # A read_committed reader reads 68 records in [115, 200): the 60 delivered and the 8 not delivered.
    report = partition_report(prepared, summary, log_start_after=115, labelled=labelled, records=68)

    assert report == {
        "topic": "orders", "partition": 2, "start": 100, "end": 200, "offsets": 100, "isolation": "read_committed",
        "expected": 68, "delivered": 60,
        "read_start": 110, "log_start_before": 110, "log_start_after": 115, "high_watermark": 250,
        # [100, 110) gone before the job plus [110, 115) gone during it; markers and aborts explained.
        "explained": {"retention": 15, "transaction_markers": 2, "aborted_transaction": 5},
        # 8 not delivered + 10 unlisted + 2 duplicates + 1 outside.
        "unexplained": 21,
        "problems": [
            "8 offsets readable now were not delivered",
            "10 missing offsets beyond the first holes listed were not classified",
            "2 duplicate records",
            "1 records outside the range",
        ],
        # Adjacent ranges of one cause merge; a change of cause starts a new range.
        "missing_ranges": [
            {"start": 100, "end": 115, "cause": "retention"},
            {"start": 115, "end": 123, "cause": "not_delivered"},
            {"start": 123, "end": 125, "cause": "transaction_markers"},
            {"start": 125, "end": 130, "cause": "aborted_transaction"},
        ],
    }, "60 + 22 explained + 8 + 10 unlisted = 100: the counts add up, so no count problem"


def test_a_partition_the_job_never_read_is_reported_as_such():
    prepared = PreparedRange(BackfillRange("orders", 3, 40, 60), log_start=0, high_watermark=60)
    assert partition_report(prepared, None, log_start_after=0, labelled=[], records=20) == {
        "topic": "orders", "partition": 3, "start": 40, "end": 60, "offsets": 20, "isolation": "read_committed",
        "expected": 20, "delivered": 0,
        "read_start": 40, "log_start_before": 0, "log_start_after": 0, "high_watermark": 60,
        "explained": {}, "unexplained": 0, "missing_ranges": [],
        "problems": ["20 records a read_committed reader reads were not delivered",
                     "counts do not add up: 0 accounted for, 20 expected"],
    }, "no summary: nothing delivered and nothing explained, so the 20 records and offsets are a problem"


def test_a_partition_the_job_never_read_counts_what_the_reader_reads_now():
    # Nothing delivered, and retention took [40, 45) since: the reader reads 15 records now, all undelivered.
    prepared = PreparedRange(BackfillRange("orders", 3, 40, 60), log_start=0, high_watermark=60)
    report = partition_report(prepared, None, log_start_after=45, labelled=[], records=15)
    assert report["problems"] == ["15 records a read_committed reader reads were not delivered",
                                  "counts do not add up: 0 accounted for, 20 expected"]


@pytest.mark.parametrize(("runs", "records", "why"), [
    ([(0, 3), (7, 10)], 6, "two runs of three records around an aborted transaction and its marker"),
    ([(5, 6)], 1, "one record"),
    ([], 0, "nothing read"),
])
def test_runs_of_offsets_hold_as_many_records_as_their_lengths(runs, records, why):
    assert records_in(runs) == records, why


def test_it_lists_at_most_the_first_missing_ranges_but_counts_all():
    prepared = PreparedRange(BackfillRange("orders", 0, 0, 1000), log_start=0, high_watermark=1000)
    labelled = [(n, n + 1, "transaction_markers") for n in range(0, 1000, 2)]
    summary = {"delivered": 500, "duplicates": 0, "outside_range": 0, "missing": 500,
               "holes": [[a, b] for a, b, _ in labelled], "holes_truncated": False}
    report = partition_report(prepared, summary, log_start_after=0, labelled=labelled, records=500)
    assert len(report["missing_ranges"]) == MISSING_RANGES_LISTED == 200
    assert report["explained"] == {"transaction_markers": 500}
    assert report["problems"] == []


@pytest.mark.parametrize(
    ("labelled", "expected", "why"),
    [
        ([(0, 5, "retention"), (5, 8, "retention"), (8, 9, "retention")], [(0, 9, "retention")],
         "three adjacent ranges of one cause are one range"),
        ([(5, 8, "retention"), (0, 5, "retention")], [(0, 8, "retention")], "given out of order, merged in order"),
        ([(0, 5, "retention"), (6, 8, "retention")], [(0, 5, "retention"), (6, 8, "retention")],
         "a gap between them keeps them apart"),
        ([(0, 5, "retention"), (5, 8, "not_delivered"), (8, 9, "retention")],
         [(0, 5, "retention"), (5, 8, "not_delivered"), (8, 9, "retention")],
         "adjacent ranges of different causes stay apart"),
    ],
)
def test_it_merges_adjacent_ranges_of_one_cause(labelled, expected, why):
    assert _merged(labelled) == expected, why


@pytest.mark.parametrize(
    ("pieces", "runs", "covered", "rest", "why"),
    [
        ([(10, 20)], [], [], [(10, 20)], "no runs cover nothing"),
        ([(10, 20)], [(0, 10), (20, 30)], [], [(10, 20)], "runs touching either end cover none of it"),
        ([(10, 20)], [(12, 14), (16, 25)], [(12, 14), (16, 20)], [(10, 12), (14, 16)],
         "two runs inside one piece split it in turn"),
        ([(0, 5), (10, 20)], [(3, 12)], [(3, 5), (10, 12)], [(0, 3), (12, 20)], "one run across two pieces"),
    ],
)
def test_it_splits_pieces_into_covered_and_not(pieces, runs, covered, rest, why):
    assert _subtract(pieces, runs) == (covered, rest), why


def test_the_summary_line_names_what_was_delivered_and_each_explained_cause():
    report = [
        {"topic": "orders", "partition": 2, "expected": 100, "delivered": 85,
         "explained": {"retention": 10, "aborted_transaction": 5}},
        {"topic": "orders", "partition": 3, "expected": 50, "delivered": 50, "explained": {}},
    ]
    assert summary_line(report) == (
        "delivered 135 of 150 records; orders[2]: 10 retention; orders[2]: 5 aborted transaction"
    )


@pytest.mark.parametrize(("report", "expected", "why"), [
    ([], True, "nothing to account for"),
    ([{"unexplained": 0, "problems": []}, {"unexplained": 0, "problems": []}], True,
     "every partition accounted for: publish, and the job succeeds"),
    ([{"unexplained": 0, "problems": []}, {"unexplained": 3, "problems": []}], False,
     "one unexplained offset in any partition is enough to discard"),
    ([{"unexplained": 0, "problems": ["counts do not add up: 9 accounted for, 10 expected"]}], False,
     "a problem without an unexplained offset (the counts) still discards"),
])
def test_only_a_report_with_everything_explained_may_publish(report, expected, why):
    assert report_explained(report) is expected, why


# --- records, not offsets: a partition [0, 10) with a transaction in it -----------------------
# 0-2 committed, 3-5 an aborted transaction, 6 its abort marker, 7-9 committed.
# A read_committed reader reads 6 records (0-2, 7-9); a read_uncommitted one 9 (all but the marker).
ABORTED = (3, 6)
MARKER = (6, 7)


def _holes(*holes):
    return {"delivered": 10 - sum(b - a for a, b in holes), "duplicates": 0, "outside_range": 0,
            "missing": sum(b - a for a, b in holes), "holes": [list(h) for h in holes], "holes_truncated": False}


@pytest.mark.parametrize(
    ("isolation", "summary", "labelled", "records", "compacted", "expected", "unexplained", "problems", "why"),
    [
        ("read_committed", _holes(ABORTED, MARKER), [(*ABORTED, "aborted_transaction"), (*MARKER, "transaction_markers")],
         6, False, 6, 0, [], "the committed records and nothing else: 6 records of 10 offsets, verified"),
        ("read_committed", _holes(MARKER), [(*MARKER, "transaction_markers")], 6, False, 6, 3,
         ["3 records delivered that a read_committed reader does not read (records of aborted transactions)"],
         "the aborted records delivered: the span's holes are all explained, only the record count shows it"),
        ("read_uncommitted", _holes(MARKER), [(*MARKER, "transaction_markers")], 9, False, 9, 0, [],
         "a read_uncommitted group read the aborted records too: 9 records, the marker is no record"),
        ("read_uncommitted", _holes(ABORTED, MARKER), [(*ABORTED, "not_delivered"), (*MARKER, "transaction_markers")],
         9, False, 9, 3, ["3 offsets readable now were not delivered"],
         "to a read_uncommitted group aborted records are records: missing them is a loss"),
        ("read_committed", _holes(MARKER), [(*MARKER, "compaction_or_markers")], 6, True, 6, 0, [],
         "on a compacted topic records the sink got may have been compacted away since: more is no proof of aborts"),
        ("read_committed", {**_holes(ABORTED, MARKER), "duplicates": 3},
         [(*ABORTED, "aborted_transaction"), (*MARKER, "transaction_markers")], 6, False, 6, 3,
         ["3 duplicate records"],
         "a duplicated write is caught even when the distinct offsets match"),
        ("read_committed", _holes(MARKER), [(*MARKER, "transaction_markers")], 8, False, 8, 1,
         ["1 records delivered that a read_committed reader does not read (records of aborted transactions)"],
         "one aborted record (5, its marker at 6) delivered: one record too many is already a problem"),
        ("read_uncommitted", _holes(), [], 9, False, 9, 1,
         ["1 records delivered that a read_uncommitted reader does not read (offsets that hold no record)"],
         "a record delivered at the marker's offset, where no reader of any isolation reads one"),
    ],
)
def test_it_verifies_the_records_a_reader_of_the_isolation_reads(
        isolation, summary, labelled, records, compacted, expected, unexplained, problems, why):
    prepared = PreparedRange(BackfillRange("orders", 2, 0, 10), log_start=0, high_watermark=10)
    # A topic is taken as not compacted unless the caller says it is.
    report = partition_report(prepared, summary, log_start_after=0, labelled=labelled, records=records,
                              isolation=isolation, **({"compacted": True} if compacted else {}))
    assert (report["offsets"], report["expected"], report["unexplained"], report["problems"]) \
        == (10, expected, unexplained, problems), why


def test_records_below_a_log_start_that_moved_during_the_job_count_as_delivered():
    # Read [0, 10) read_uncommitted; retention then took [0, 4): the sink holds 0-3 (4 records), and the
    # reader now reads 4, 5, 7, 8, 9 (5 records) above the log start. 9 records expected, 9 delivered.
    prepared = PreparedRange(BackfillRange("orders", 2, 0, 10), log_start=0, high_watermark=10)
    report = partition_report(prepared, _holes(MARKER), log_start_after=4, labelled=[(*MARKER, "transaction_markers")],
                              records=5, isolation="read_uncommitted")
    assert (report["expected"], report["delivered"], report["problems"]) == (9, 9, [])


@pytest.mark.parametrize(
    ("isolation", "committed", "uncommitted", "expected", "why"),
    [
        ("read_committed", [(0, 3), (7, 10)], [(3, 6)], [(3, 6, "aborted_transaction"), (6, 7, "transaction_markers")],
         "read_committed: what only a read_uncommitted reader reads is an aborted transaction, explained"),
        ("read_uncommitted", [], [(0, 6), (7, 10)], [(3, 6, "not_delivered"), (6, 7, "transaction_markers")],
         "read_uncommitted: the aborted records are the group's records, so missing them is not explained"),
    ],
)
def test_it_labels_holes_by_the_isolation_of_the_reader(isolation, committed, uncommitted, expected, why):
    assert explain_missing(holes=[(3, 7)], log_start=0, committed_runs=committed, uncommitted_runs=uncommitted,
                           isolation=isolation) == expected, why


def test_the_summary_line_says_offsets_when_they_are_not_the_records():
    report = [{"topic": "orders", "partition": 2, "expected": 6, "offsets": 10, "delivered": 6,
               "explained": {"aborted_transaction": 3, "transaction_markers": 1}}]
    assert summary_line(report) == ("delivered 6 of 6 records (10 offsets); orders[2]: 3 aborted transaction; "
                                    "orders[2]: 1 transaction markers")
