"""Offsets are not records (issue 32): which count of a missed range a group
reads, and the words that keep the two apart.

A missed range is counted in offsets, ``[start, end)``. Commit and abort
markers take one offset each and are never delivered; aborted records reach
only ``read_uncommitted`` readers; compaction and retention leave holes. So a
number is called "records" only once the range was read and counted, for
the isolation level of the group that would have read it; until then it is
"offsets". Pure: no Django, no Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from groups.domain.read_isolation import READ_UNCOMMITTED, reader_isolation

# A finding's range is counted by reading it from the log once: larger ranges
# (more than this many offsets) stay in offsets rather than cost a long read.
COUNT_MAX_OFFSETS = 2_000_000


@dataclass(frozen=True)
class CountedRange:
    """What a count read of ``[start, end)``; ``read_committed`` None while a
    transaction held records of it open."""

    start: int
    end: int
    read_committed: int | None
    read_uncommitted: int | None


def count_due(*, start: int | None, end: int | None, counted: CountedRange | None) -> bool:
    """A range to count: one that exists, is not larger than the bound, and
    was not counted as it is (or its read_committed count waited on a transaction)."""
    if start is None or end is None or not 0 < end - start <= COUNT_MAX_OFFSETS:
        return False
    return counted is None or (counted.start, counted.end) != (start, end) or counted.read_committed is None


def group_records(*, isolation: str, counted: CountedRange | None, start: int | None, end: int | None) -> int | None:
    """The records of ``[start, end)`` a group reads, as a backfill reads
    them for it (``read_isolation.reader_isolation``): the read_uncommitted
    count for a group declared so, else the read_committed one. None unless
    this very range was counted."""
    if counted is None or start is None or (counted.start, counted.end) != (start, end):
        return None
    return counted.read_uncommitted if reader_isolation(isolation) == READ_UNCOMMITTED else counted.read_committed


def offsets_and_records(*, offsets: int, records: int | None) -> str:
    """"12 offsets" until counted; "12 offsets, 9 records" once counted."""
    said = f"{offsets} offset{'s' if offsets != 1 else ''}"
    if records is None:
        return said
    return f"{said}, {records} record{'s' if records != 1 else ''}"
