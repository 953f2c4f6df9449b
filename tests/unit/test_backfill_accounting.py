"""The pure accounting of a backfill's result (groups.domain.backfill):
which cause explains which missing offsets, one partition's report, the
job's summary. Each case says why its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.backfill import PreparedRange, condense_error, explain_missing, partition_report
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
    report = partition_report(prepared, summary, log_start_after=10, labelled=[(40, 45, "not_delivered")])
    assert report["explained"] == {"retention": 10}  # [0, 10) was below the log start before the job
    assert report["unexplained"] == 5
    assert report["problems"] == ["5 offsets readable now were not delivered"]


def test_it_keeps_the_root_cause_when_it_cuts_a_long_spark_error():
    text = "\n".join(["py4j.protocol.Py4JJavaError: An error occurred while calling o71.save."]
                     + [f"\tat frame{n}" for n in range(2000)]
                     + ["Caused by: org.apache.kafka.common.errors.TimeoutException: no leader"]
                     + [f"\tat deeper{n}" for n in range(2000)])
    cut = condense_error(text, limit=4000)
    assert len(cut) <= 4100
    assert cut.startswith("py4j.protocol.Py4JJavaError")
    assert "Caused by: org.apache.kafka.common.errors.TimeoutException: no leader" in cut
    assert "characters cut" in cut
