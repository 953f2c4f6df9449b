"""groups.domain.record_counts: offsets become records only once counted (issue 32)."""

from __future__ import annotations

import pytest

from groups.domain.record_counts import (
    COUNT_MAX_OFFSETS,
    CountedRange,
    count_due,
    group_records,
    offsets_and_records,
)

COUNTED = CountedRange(start=0, end=40, read_committed=30, read_uncommitted=36)


@pytest.mark.parametrize("start, end, counted, due, why", [
    (0, 40, None, True, "a decided range never counted"),
    (0, 40, COUNTED, False, "counted as it is"),
    (2, 40, COUNTED, True, "retention moved the start: the count was of another range"),
    (0, 41, COUNTED, True, "another end: another range"),
    (0, 40, CountedRange(0, 40, None, 36), True, "read_committed waited on an open transaction: count again"),
    (None, None, None, False, "no range (undecided, covered): nothing to count"),
    (40, 40, None, False, "an empty range holds nothing"),
    (39, 40, None, True, "a range of one offset is counted"),
    (None, 40, None, False, "no start: no range"),
    (0, None, None, False, "no end: no range"),
    (0, COUNT_MAX_OFFSETS, None, True, "at the bound: counted"),
    (0, COUNT_MAX_OFFSETS + 1, None, False, "past the bound: stays in offsets"),
])
def test_count_due(start, end, counted, due, why):
    assert count_due(start=start, end=end, counted=counted) is due, why


@pytest.mark.parametrize("isolation, counted, start, end, records, why", [
    ("unknown", COUNTED, 0, 40, 30, "not declared: what a read_committed reader (and the backfill) reads"),
    ("read_committed", COUNTED, 0, 40, 30, "declared read_committed: markers and aborted records excluded"),
    ("read_uncommitted", COUNTED, 0, 40, 36, "declared read_uncommitted: aborted records included"),
    ("unknown", COUNTED, 5, 40, None, "the range changed since the count: no number is called records"),
    ("unknown", None, 0, 40, None, "not counted"),
    ("unknown", COUNTED, None, None, None, "no range"),
    ("unknown", CountedRange(0, 40, None, 36), 0, 40, None, "read_committed not countable yet"),
])
def test_group_records(isolation, counted, start, end, records, why):
    assert group_records(isolation=isolation, counted=counted, start=start, end=end) == records, why


@pytest.mark.parametrize("offsets, records, words", [
    (12, None, "12 offsets"),
    (1, None, "1 offset"),
    (12, 9, "12 offsets, 9 records"),
    (2, 1, "2 offsets, 1 record"),
    (0, 0, "0 offsets, 0 records"),
])
def test_offsets_and_records(offsets, records, words):
    assert offsets_and_records(offsets=offsets, records=records) == words
