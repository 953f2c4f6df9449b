"""Counting what a sink delivered, per partition, against ``[start, end)``:
pure (no Spark), so the rules are unit-tested. The sinks
(``adapters.spark.sinks``) feed it what they read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from groups.domain.planning import BackfillRange

# A partition with more holes than this is still counted exactly; only the
# list of holes is cut (``holes_truncated``).
MAX_HOLES_PER_PARTITION = 100_000


def holes_of(start: int, end: int, islands: Iterable[tuple[int, int]]) -> tuple[list[list[int]], bool]:
    """The offsets of ``[start, end)`` not covered by ``islands`` (sorted,
    disjoint half-open ranges inside ``[start, end)``), as half-open ranges;
    at most MAX_HOLES_PER_PARTITION of them, and whether the list was cut."""
    holes: list[list[int]] = []
    cursor = start
    truncated = False
    for island_start, island_end in islands:
        if island_start > cursor:
            if len(holes) == MAX_HOLES_PER_PARTITION:
                truncated = True
                break
            holes.append([cursor, island_start])
        cursor = max(cursor, island_end)
    if not truncated and cursor < end:
        if len(holes) == MAX_HOLES_PER_PARTITION:
            truncated = True
        else:
            holes.append([cursor, end])
    return holes, truncated


def partition_summary(
    *, topic: str, partition: int, start: int, end: int, rows_in_range: int, distinct_in_range: int,
    islands: Iterable[tuple[int, int]], rows_outside: int = 0,
) -> dict:
    """What one partition's sink holds, against ``[start, end)``.

    ``delivered`` counts distinct offsets of the range; ``duplicates`` extra
    copies of them; ``missing`` = expected - delivered, located by ``holes``.
    """
    holes, truncated = holes_of(start, end, islands) if distinct_in_range < end - start else ([], False)
    return {
        "topic": topic, "partition": partition, "start": start, "end": end, "expected": end - start,
        "delivered": distinct_in_range, "duplicates": rows_in_range - distinct_in_range,
        "outside_range": rows_outside, "missing": end - start - distinct_in_range,
        "holes": holes, "holes_truncated": truncated,
    }


def handler_summaries(results: Iterable[tuple[str, int, int, list[tuple[int, int]]]],
                      ranges: Sequence[BackfillRange]) -> list[dict]:
    """Summaries of a handler sink from its Spark partitions' reports: each
    ``(topic, partition, records pulled, runs of consecutive offsets)``.
    Runs of several Spark partitions may overlap (a re-run task): overlaps
    count as duplicates, and runs outside the range as outside it."""
    pulled: dict[tuple[str, int], int] = {}
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for topic, partition, count, runs in results:
        pulled[(topic, partition)] = pulled.get((topic, partition), 0) + count
        spans.setdefault((topic, partition), []).extend(runs)
    summaries = []
    for r in ranges:
        key = (r.topic, r.partition)
        inside = sorted((max(a, r.start), min(b, r.end)) for a, b in spans.get(key, [])
                        if a < r.end and b > r.start)
        merged: list[tuple[int, int]] = []
        for a, b in inside:
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        distinct = sum(b - a for a, b in merged)
        in_range_rows = sum(b - a for a, b in inside)
        summaries.append(partition_summary(
            topic=r.topic, partition=r.partition, start=r.start, end=r.end,
            rows_in_range=in_range_rows, distinct_in_range=distinct, islands=merged,
            rows_outside=pulled.get(key, 0) - in_range_rows,
        ))
    return summaries
