"""The proof that a sink holds each offset once, from footers and the
write's checksum (adapters.spark.offset_check): each case says why the answer
is right. The real-Spark side is tests/integration/test_backfill_verification.py."""

from __future__ import annotations

import numpy as np
import pytest

from groups.domain.planning import BackfillRange
from adapters.spark.offset_check import (
    Checksum,
    FileFooter,
    ReplayTail,
    expected_checksum,
    proven_replay,
    proven_summaries,
    replay_ends,
    spark_xxhash64,
)

T = "t"
RANGE = BackfillRange(T, 0, 10, 40)


def footer(low, high, rows=None, partition=0, topic=T):
    return FileFooter(topic=topic, partition=partition, rows=(high - low + 1) if rows is None else rows, low=low,
                      high=high)


def checksum_of(offsets) -> Checksum:
    hashed = spark_xxhash64(np.array(offsets, dtype=np.int64))
    return Checksum(rows=len(offsets), high=int((hashed >> 32).sum()), low=int((hashed & 0xFFFFFFFF).sum()))


COMPLETE = checksum_of(range(10, 40))


def test_it_hashes_offsets_as_spark_does():
    # Spark 4.2: SELECT xxhash64(id) FROM range(3)
    assert spark_xxhash64(np.arange(3)).tolist() == [-5252525462095825812, -7001672635703045582,
                                                     -3341702809300393011]


def test_the_checksum_of_a_range_is_the_sum_over_its_offsets_in_chunks(monkeypatch):
    monkeypatch.setattr("adapters.spark.offset_check.CHUNK", 7)  # several chunks, the last one short
    assert expected_checksum([RANGE]) == COMPLETE


@pytest.mark.parametrize("footers, observed, proven, why", [
    ([footer(10, 19), footer(20, 39)], COMPLETE, True, "two files tile [10, 40), the checksum matches"),
    ([footer(20, 39), footer(10, 19)], COMPLETE, True, "the order files are listed in does not matter"),
    ([footer(10, 19), footer(21, 39)], checksum_of([*range(10, 20), *range(21, 40)]), False,
     "a hole between files (a file lost, or a record)"),
    ([footer(10, 19), footer(15, 39)], COMPLETE, False, "files overlap (a file written twice)"),
    ([footer(10, 19), footer(10, 19), footer(20, 39)], COMPLETE, False, "a file copied"),
    ([footer(10, 39, rows=29)], COMPLETE, False, "a file holds fewer rows than the offsets it spans"),
    ([footer(10, 38)], checksum_of(range(10, 39)), False, "the range's last offset is missing"),
    ([footer(11, 39)], checksum_of(range(11, 40)), False, "the range's first offset is missing"),
    ([footer(10, 39)], checksum_of([*range(10, 25), 26, *range(26, 40)]), False,
     "offset 25 written as a second 26: the footers cannot see it, the checksum can"),
    ([footer(10, 39)], Checksum(rows=31, high=COMPLETE.high, low=COMPLETE.low), False,
     "the write saw more rows than the files hold"),
    ([footer(10, 39)], None, False, "no observation from the write: nothing to prove with"),
    ([FileFooter(T, 0, rows=30, low=None, high=None)], COMPLETE, False, "a file without statistics"),
    ([footer(10, 39), footer(0, 0, partition=7)], COMPLETE, False, "a file of a partition not in the job"),
    ([], Checksum(0, 0, 0), False, "nothing written for a non-empty range"),
])
def test_it_proves_only_a_range_held_exactly_once(footers, observed, proven, why):
    summaries = proven_summaries([RANGE], footers, observed)
    assert (summaries is not None) == proven, why
    if proven:
        assert summaries[0]["delivered"] == 30 and summaries[0]["missing"] == 0 and summaries[0]["duplicates"] == 0


# The replay: source partition 0 ([10, 40), 30 records) goes to partition 0
# of "t.replay", which held 100 records before the job; its partition 1
# gets nothing.
R = "t.replay"
STARTS = {(R, 0): 100, (R, 1): 5}


def test_a_replay_partition_must_end_after_the_records_replayed_to_it():
    assert replay_ends([RANGE], {T: R}, {(R, 0): 100, (R, 1): 5}) == {(R, 0): 130, (R, 1): 5}
    two_sources = [RANGE, BackfillRange("u", 0, 0, 3)]
    assert replay_ends(two_sources, {T: R, "u": R}, {(R, 0): 100}) == {(R, 0): 133}, \
        "two sources replayed to one topic: partition 0 gets both"


LAST = ReplayTail(rows=1, first=129, own=1)
NOTHING = ReplayTail(rows=0, first=None, own=0)


@pytest.mark.parametrize("tails, proven, why", [
    ({(R, 0): LAST, (R, 1): NOTHING}, True, "ends where it must, the last record is ours"),
    ({(R, 0): ReplayTail(rows=0, first=None, own=0), (R, 1): NOTHING}, False,
     "partition 0 ends early: a partial write"),
    ({(R, 0): ReplayTail(rows=2, first=129, own=2), (R, 1): NOTHING}, False,
     "a record after the end: a retried task's duplicate"),
    ({(R, 0): ReplayTail(rows=1, first=129, own=0), (R, 1): NOTHING}, False,
     "the record at the end is another writer's: one of ours is missing"),
    ({(R, 0): ReplayTail(rows=1, first=130, own=1), (R, 1): NOTHING}, False,
     "the first record read is not the one before the end (the end is not where it must be)"),
    ({(R, 0): LAST, (R, 1): ReplayTail(rows=1, first=5, own=0)}, False,
     "a record in a partition the job wrote nothing to (another writer, or a misrouted record)"),
    ({(R, 0): LAST}, False, "a partition whose tail could not be read"),
    ({}, False, "Spark could not read the tails (a partition ends before the offset asked for)"),
])
def test_it_proves_a_replay_only_when_each_partition_ends_with_its_last_record(tails, proven, why):
    ends = {(R, 0): 130, (R, 1): 5}
    summaries = proven_replay([RANGE], starts=STARTS, ends=ends, tails=tails, heads={(T, 0): True})
    assert (summaries is not None) == proven, why
    if proven:
        assert summaries[0]["delivered"] == 30 and summaries[0]["missing"] == 0 and summaries[0]["duplicates"] == 0


@pytest.mark.parametrize("heads, why", [
    ({(T, 0): False}, "the source no longer holds the range's first offset: retention removed records while "
                      "the job read, and a record it skipped and a duplicate would keep the count"),
    ({}, "the source's first offset could not be read"),
    ({("other", 0): True}, "a head of another partition says nothing of this range's"),
])
def test_it_proves_nothing_once_the_source_lost_the_start_of_a_range(heads, why):
    ends = {(R, 0): 130, (R, 1): 5}
    assert proven_replay([RANGE], starts=STARTS, ends=ends, tails={(R, 0): LAST, (R, 1): NOTHING},
                         heads=heads) is None, why
