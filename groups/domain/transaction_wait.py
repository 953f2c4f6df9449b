"""Whether a backfill may read its ranges yet: pure (no Django, no Kafka).

A read_committed reader reads a partition only up to its last stable offset
(LSO): the first offset of the oldest transaction still open on it. A range
whose end lies above the LSO cannot be read whole yet: Spark would stop at
the LSO and the records above it would be missing, or be read before their
transaction commits or aborts. So the job waits until the LSO of every
partition reaches its range's end, and says what holds it: the partition,
the offset the open transaction started at and, where the broker describes
it, the producer, its transactional id, how long it has been open, and its
``transaction.timeout.ms`` (the coordinator aborts it then, so the wait ends
by then). A read_uncommitted reader reads up to the high watermark: it never
waits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from groups.domain.planning import BackfillRange


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction open on one partition (``describeProducers``): its
    producer, the offset of its first record there; from the coordinator
    (``describeTransactions``) its transactional id, start time (epoch ms) and
    timeout; 0 or "" where they are not known."""

    topic: str
    partition: int
    producer_id: int
    start_offset: int
    transactional_id: str = ""
    started_ms: int = 0
    timeout_ms: int = 0


@dataclass(frozen=True)
class HeldRange:
    """A range whose end an open transaction holds: the LSO is below ``range.end``."""

    range: BackfillRange
    stable_offset: int


def held_ranges(ranges: Iterable[BackfillRange], stable_offsets: Mapping[tuple[str, int], int]) -> list[HeldRange]:
    """The ranges a read_committed reader cannot read whole yet: their
    partition's last stable offset is below their end (offsets are "next to
    read", so an LSO equal to the end lets the reader read the range whole)."""
    return [HeldRange(r, stable_offsets[(r.topic, r.partition)]) for r in ranges
            if stable_offsets[(r.topic, r.partition)] < r.end]


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.0f} s"


def hold_message(held: Iterable[HeldRange], transactions: Iterable[OpenTransaction], *, now_ms: int) -> str:
    """One line per held partition: where the range ends, where the LSO is,
    and the transaction that holds it (the one that started at the LSO),
    as far as it is known."""
    by_start = {(t.topic, t.partition, t.start_offset): t for t in transactions}
    lines = []
    for h in held:
        r = h.range
        line = (f"{r.topic}[{r.partition}]: the range [{r.start}, {r.end}) ends past the last stable offset "
                f"{h.stable_offset}, where a transaction still open started")
        open_transaction = by_start.get((r.topic, r.partition, h.stable_offset))
        if open_transaction is not None:
            line += f" (producer id {open_transaction.producer_id}"
            if open_transaction.transactional_id:
                line += f", transactional.id {open_transaction.transactional_id!r}"
            if open_transaction.started_ms:
                line += f", open for {_seconds(max(0, now_ms - open_transaction.started_ms))}"
                if open_transaction.timeout_ms:
                    line += f" of its transaction.timeout.ms {_seconds(open_transaction.timeout_ms)}"
            line += ")"
        lines.append(line)
    return "; ".join(lines)


def abort_due_ms(held: Iterable[HeldRange], transactions: Iterable[OpenTransaction]) -> int | None:
    """When the coordinator aborts the last of the transactions holding the
    ranges at the latest (start time + timeout), or None when one of them is
    not described: the longest a wait for them can last."""
    by_start = {(t.topic, t.partition, t.start_offset): t for t in transactions}
    due = 0
    for h in held:
        t = by_start.get((h.range.topic, h.range.partition, h.stable_offset))
        if t is None or not t.started_ms or not t.timeout_ms:
            return None
        due = max(due, t.started_ms + t.timeout_ms)
    return due
