"""Counting what a sink delivered (adapters.spark.counting): pure, no Spark.
The accounting of missing offsets is tests/unit/test_backfill_accounting.py."""

from __future__ import annotations

import pytest

from groups.domain.planning import BackfillRange
from adapters.spark import counting
from adapters.spark.counting import handler_summaries, holes_of, partition_summary


@pytest.mark.parametrize(
    ("start", "end", "islands", "expected"),
    [
        (0, 10, [(0, 10)], []),
        (0, 10, [], [[0, 10]]),
        (0, 10, [(2, 4), (6, 9)], [[0, 2], [4, 6], [9, 10]]),
        (5, 8, [(5, 6), (7, 8)], [[6, 7]]),
    ],
)
def test_it_finds_the_holes_of_a_range(start, end, islands, expected):
    assert holes_of(start, end, islands) == (expected, False)


def test_it_cuts_the_list_of_holes_but_says_so(monkeypatch):
    monkeypatch.setattr(counting, "MAX_HOLES_PER_PARTITION", 2)
    assert holes_of(0, 10, [(1, 2), (3, 4), (5, 6)]) == ([[0, 1], [2, 3]], True)
    # Exactly the limit: nothing was cut.
    assert holes_of(0, 4, [(1, 2), (3, 4)]) == ([[0, 1], [2, 3]], False)


def test_it_counts_duplicates_and_missing_offsets_of_a_partition():
    summary = partition_summary(topic="t", partition=1, start=10, end=20, rows_in_range=9, distinct_in_range=8,
                                islands=[(10, 14), (16, 20)], rows_outside=3)
    assert summary == {"topic": "t", "partition": 1, "start": 10, "end": 20, "expected": 10, "delivered": 8,
                       "duplicates": 1, "outside_range": 3, "missing": 2, "holes": [[14, 16]],
                       "holes_truncated": False}


def test_a_complete_partition_has_no_holes_whatever_the_islands_say():
    summary = partition_summary(topic="t", partition=0, start=0, end=5, rows_in_range=5, distinct_in_range=5,
                                islands=[])
    assert (summary["missing"], summary["holes"]) == (0, [])


def test_it_counts_what_a_handler_pulled_across_spark_partitions():
    ranges = [BackfillRange("t", 0, 10, 20), BackfillRange("t", 1, 0, 5)]
    results = [
        ("t", 0, 6, [(10, 14), (25, 27)]),  # two records beyond the range's end
        ("t", 0, 3, [(12, 15)]),  # a re-run task: 12 and 13 twice
    ]
    by_partition = {s["partition"]: s for s in handler_summaries(results, ranges)}
    assert by_partition[0]["delivered"] == 5  # 10..14
    assert by_partition[0]["duplicates"] == 2
    assert by_partition[0]["outside_range"] == 2
    assert by_partition[0]["holes"] == [[15, 20]]
    assert by_partition[1]["delivered"] == 0  # the handler never saw partition 1
    assert by_partition[1]["holes"] == [[0, 5]]
