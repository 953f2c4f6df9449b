"""Proof that a sink holds exactly ``[start, end)`` of each partition without
reading it back: what the sink says about itself checked against what the
write saw pass (a checksum of the offsets, observed by Spark in the same
pass that writes them). For Parquet, the files' footers (rows, and the least
and greatest offset of each row group) and that checksum; for the replay
topics, where each replay partition ends (``proven_replay``, no checksum).

Pure: numpy, no Spark. The sinks (``adapters.spark.sinks.parquet``,
``adapters.spark.sinks.kafka``) gather the footers and the observation, or
the replay's tails; ``proven_summaries`` and ``proven_replay`` decide. When they cannot
prove the range complete (a hole, an extra copy, a file it cannot read the
statistics of, a checksum that differs), it says so (None) and the sink
counts by reading back, which locates every hole and duplicate.

The checksum is Spark's ``xxhash64`` of each offset (seed 42), summed as two
halves so a long never overflows (below 2**31 records): the high 32 bits
(signed) and the low 32 bits. Holes and duplicates that keep the count, the
least and the greatest offset would have to cancel both sums, about a
2**-64 chance for offsets that are not chosen to collide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from groups.domain.planning import BackfillRange
from adapters.spark.counting import partition_summary

SPARK_HASH_SEED = 42
# Offsets hashed per numpy pass: 8 MiB of int64 at a time.
CHUNK = 1 << 20
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_LOW_BITS = 0xFFFFFFFF


def _rotate_left(values: np.ndarray, bits: int) -> np.ndarray:
    return (values << np.uint64(bits)) | (values >> np.uint64(64 - bits))


def spark_xxhash64(offsets: np.ndarray, seed: int = SPARK_HASH_SEED) -> np.ndarray:
    """Spark's ``xxhash64(offset)`` of a long column (``XXH64.hashLong``), as int64."""
    values = offsets.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        hashed = np.uint64(seed) + _P5 + np.uint64(8)
        hashed = hashed ^ (_rotate_left(values * _P2, 31) * _P1)
        hashed = _rotate_left(hashed, 27) * _P1 + _P4
        hashed ^= hashed >> np.uint64(33)
        hashed *= _P2
        hashed ^= hashed >> np.uint64(29)
        hashed *= _P3
        hashed ^= hashed >> np.uint64(32)
    return hashed.view(np.int64)


@dataclass(frozen=True)
class Checksum:
    """What the write observed, or what a complete range must give."""

    rows: int
    high: int  # sum of xxhash64(offset) >> 32
    low: int  # sum of xxhash64(offset) & 0xFFFFFFFF


def expected_checksum(ranges: Iterable[BackfillRange]) -> Checksum:
    """The checksum of every offset of the ranges, each once."""
    rows = high = low = 0
    for r in ranges:
        for first in range(r.start, r.end, CHUNK):
            hashed = spark_xxhash64(np.arange(first, min(first + CHUNK, r.end), dtype=np.int64))
            rows += len(hashed)
            high += int((hashed >> 32).sum())
            low += int((hashed & _LOW_BITS).sum())
    return Checksum(rows=rows, high=high, low=low)


@dataclass(frozen=True)
class FileFooter:
    """One data file of a (topic, partition) folder, as its footer says:
    rows, and the least and greatest offset (None when a row group has no
    statistics)."""

    topic: str
    partition: int
    rows: int
    low: int | None
    high: int | None


def proven_summaries(ranges: Sequence[BackfillRange], footers: Sequence[FileFooter],
                     observed: Checksum | None) -> list[dict] | None:
    """The summaries (``counting.partition_summary``) of a sink that holds
    each offset of every range exactly once, or None when that is not proven:

    1. the files of each range's folder, ordered by their least offset, tile
       ``[start, end)``: the first starts at ``start``, each next one right
       after the one before, the last ends at ``end - 1``, and each holds as
       many rows as offsets it spans; no file of a folder outside the ranges;
    2. the write observed as many rows as the files hold, and the checksum of
       a complete range (a duplicate and a hole inside one file keep step 1's
       counts; they change the checksum).
    """
    if observed is None:
        return None
    by_partition: dict[tuple[str, int], list[FileFooter]] = {}
    for footer in footers:
        by_partition.setdefault((footer.topic, footer.partition), []).append(footer)
    planned = {(r.topic, r.partition): r for r in ranges}
    if set(by_partition) - set(planned):
        return None
    stored = 0
    for key, r in planned.items():
        files = by_partition.get(key, [])
        if r.end > r.start and not files:
            return None
        if any(f.low is None or f.high is None for f in files):
            return None
        cursor = r.start
        for f in sorted(files, key=lambda f: f.low):
            if f.low != cursor or f.rows != f.high - f.low + 1:
                return None
            cursor = f.high + 1
        if cursor != r.end:
            return None
        stored += sum(f.rows for f in files)
    if observed.rows != stored or observed != expected_checksum(ranges):
        return None
    return complete_summaries(ranges)


def complete_summaries(ranges: Sequence[BackfillRange]) -> list[dict]:
    """The summaries of a sink that holds each offset of every range once."""
    return [partition_summary(topic=r.topic, partition=r.partition, start=r.start, end=r.end,
                              rows_in_range=r.end - r.start, distinct_in_range=r.end - r.start,
                              islands=[(r.start, r.end)] if r.end > r.start else [])
            for r in ranges]


@dataclass(frozen=True)
class ReplayTail:
    """What a replay partition holds from the offset where this job's last
    record must be (or from where the job began writing, for a partition it
    wrote nothing to) to its end: its records, the first one's offset, and
    how many of them carry this attempt's job and attempt headers."""

    rows: int
    first: int | None
    own: int


def replay_ends(ranges: Sequence[BackfillRange], topics: Mapping[str, str],
                starts: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Where each replay partition must end if the job wrote every offset of
    the ranges once and nothing else wrote to it: its end before the job
    (``starts``, by replay topic and partition) plus the offsets replayed to
    it (partition p of a source goes to partition p of its replay topic)."""
    ends = dict(starts)
    for r in ranges:
        key = (topics[r.topic], r.partition)
        ends[key] = ends[key] + (r.end - r.start)
    return ends


def proven_replay(ranges: Sequence[BackfillRange], *, starts: Mapping[tuple[str, int], int],
                  ends: Mapping[tuple[str, int], int],
                  tails: Mapping[tuple[str, int], ReplayTail],
                  heads: Mapping[tuple[str, int], bool]) -> list[dict] | None:
    """The summaries of replay topics that hold each offset of every range
    exactly once, or None when that is not proven (the sink then reads the
    replay back, which locates every hole and duplicate): every replay
    partition ends where ``replay_ends`` says, and the record just before
    that end exists, is this attempt's, and is the last one (a partial write
    ends it early, a duplicate from a retried Spark task or a record of
    another writer late); one the job wrote nothing to has no record after
    its start; and the source still holds each range's first offset after
    the write (``heads``, by source topic and partition).

    Counts, not offsets: a record the read skipped and a retried task's
    duplicate in the same replay partition would cancel out (Spark's V1
    Kafka writer reports no observed metrics to check a checksum against).
    The read skips what retention removed while it ran (it does not fail on
    data loss), and retention removes from the start: a source that still
    holds the first offset lost nothing of the range. Not excluded: a range
    that holds fewer records than offsets (transaction markers, aborted
    records for read_committed, compaction) and a retried task's duplicates
    exactly as many; the tail read sees neither."""
    if not all(heads.get((r.topic, r.partition), False) for r in ranges):
        return None
    for key, end in ends.items():
        tail = tails.get(key)
        if tail is None:
            return None
        if end > starts[key]:
            if (tail.rows, tail.first, tail.own) != (1, end - 1, 1):
                return None
        elif tail.rows != 0:
            return None
    return complete_summaries(ranges)
