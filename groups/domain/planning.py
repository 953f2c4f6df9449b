"""Pure planning of remediations: no Django, no Kafka, offsets are "next to
read" and ranges half-open.

Reset planning follows Kafka's own reset tool: a target outside
``[log start, high watermark]`` is clamped to it, and the clamp is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal

from groups.domain.finding_states import UNDECIDED, UNTAKEN

TargetKind = Literal["earliest", "offset", "timestamp", "shift"]
# Messages read as English: "an offset reset", "a shift reset".
_ARTICLE = {"earliest": "an", "offset": "an", "timestamp": "a", "shift": "a"}


class PlanError(ValueError):
    """The request cannot be planned; the message says why, for the operator."""


def moment_ms(text: str) -> int:
    """An ISO 8601 date-time (``2026-11-25T07:44:00Z``, ``2026-11-25 08:44+01:00``)
    as epoch milliseconds; without a zone it is UTC, the zone every page shows."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise PlanError(f"{text!r} is not an ISO 8601 date-time (like 2026-11-25T07:44:00Z) "
                        "or epoch milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class PartitionPosition:
    topic: str
    partition: int
    log_start: int
    high_watermark: int
    committed: int | None


@dataclass(frozen=True)
class ResetTarget:
    kind: TargetKind
    # offset: the offset; shift: the signed shift; timestamp: epoch milliseconds
    # (given as a number of them, or as an ISO 8601 date-time).
    value: int | None = None

    @classmethod
    def parse(cls, *, kind: str, value: str | int | None) -> ResetTarget:
        if kind not in ("earliest", "offset", "timestamp", "shift"):
            raise PlanError(f"unknown reset target {kind!r}: use earliest, offset, timestamp or shift")
        if kind == "earliest":
            return cls("earliest")
        if value is None or value == "":
            raise PlanError(f"{_ARTICLE[kind]} {kind} reset needs a value")
        # A whole number, or text of one: never a fraction, a boolean or an infinity.
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise PlanError(f"{kind} must be a whole number, got {value!r}")
        if kind == "timestamp" and isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            value = moment_ms(value)
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise PlanError(f"{kind} must be a whole number, got {value!r}") from None
        if kind == "offset" and number < 0:
            raise PlanError(f"offset must not be negative, got {number}")
        if kind == "timestamp" and number < 0:
            raise PlanError(f"timestamp must not be negative, got {number}")
        return cls(kind, number)

    def require_not_future(self, *, now_ms: int) -> None:
        """Refuse a timestamp after ``now_ms``: no message can be that recent,
        so Kafka would answer "the end" and the reset would silently skip
        everything written until then."""
        if self.kind == "timestamp" and self.value > now_ms:
            raise PlanError(f"timestamp {self.value} is in the future (now is {now_ms}): no message is that recent")


@dataclass(frozen=True)
class PlannedReset:
    topic: str
    partition: int
    log_start: int
    high_watermark: int
    current: int | None
    planned: int
    clamped: bool
    # Messages the group will read again (planned below its commit), or skip (above it).
    redelivered: int
    skipped: int
    note: str

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PlannedReset:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


def _requested_offset(*, target: ResetTarget, position: PartitionPosition, timestamp_offset: int | None) -> int:
    if target.kind == "earliest":
        return position.log_start
    if target.kind == "offset":
        return target.value
    if target.kind == "shift":
        base = position.committed if position.committed is not None else position.log_start
        return base + target.value
    # timestamp: the first offset at or after it; none means "the end".
    return position.high_watermark if timestamp_offset is None else timestamp_offset


def plan_reset(
    *, target: ResetTarget, positions: list[PartitionPosition],
    timestamp_offsets: dict[tuple[str, int], int | None] | None = None,
) -> list[PlannedReset]:
    """The planned offset per partition, clamped to [log start, high watermark].

    A timestamp target needs ``timestamp_offsets`` (looked up from the broker
    by the caller: the first offset at or after the timestamp, or None).
    """
    if target.kind == "timestamp" and timestamp_offsets is None:
        raise PlanError("a timestamp reset is resolved against the broker when the job runs")
    plans = []
    for position in sorted(positions, key=lambda p: (p.topic, p.partition)):
        requested = _requested_offset(
            target=target, position=position,
            timestamp_offset=(timestamp_offsets or {}).get((position.topic, position.partition)),
        )
        planned = min(max(requested, position.log_start), position.high_watermark)
        clamped = planned != requested
        current = position.committed
        if current is None:
            note = "no committed offset: the group will start here instead of applying auto.offset.reset"
            redelivered = skipped = 0
        else:
            redelivered, skipped = max(0, current - planned), max(0, planned - current)
            note = ""
        if clamped:
            # Positions run from the log start to the high watermark inclusive (the end is a valid position).
            note = (f"requested {requested} is outside [{position.log_start}, {position.high_watermark}] "
                    f"(log start, high watermark): clamped to {planned}" + (f"; {note}" if note else ""))
        plans.append(PlannedReset(
            topic=position.topic, partition=position.partition, log_start=position.log_start,
            high_watermark=position.high_watermark, current=current, planned=planned, clamped=clamped,
            redelivered=redelivered, skipped=skipped, note=note,
        ))
    return plans


def reset_drift(*, plan: list[PlannedReset], committed: dict[tuple[str, int], int | None]) -> list[str]:
    """Partitions whose committed offset moved since the plan, one line each.

    A partition has not moved when its commit is still the plan's ``current``,
    or already the ``planned`` offset (an earlier attempt of this job whose
    answer was lost may have applied it). Anything else was moved by someone
    else, and a reset must not overwrite it.
    """
    moved = []
    for p in plan:
        now = committed.get((p.topic, p.partition))
        if now != p.current and now != p.planned:
            moved.append(f"{p.topic}[{p.partition}] was {_shown(p.current)} when planned, now {_shown(now)}")
    return moved


def reset_mismatches(*, plan: list[PlannedReset], committed: dict[tuple[str, int], int | None]) -> list[str]:
    """Partitions whose committed offset, read back after the commit, is not
    the planned one, one line each. A reset is done only when this is empty."""
    return [
        f"{p.topic}[{p.partition}] reads back {_shown(committed.get((p.topic, p.partition)))}, planned {p.planned}"
        for p in plan
        if committed.get((p.topic, p.partition)) != p.planned
    ]


def _shown(offset: int | None) -> str:
    return "no commit" if offset is None else str(offset)


# A reset re-reads everything after its planned offset, a backfill only the
# missed ranges: past both bounds, the reset's duplicates dwarf the loss.
REDELIVERY_RATIO = 10
REDELIVERY_MARGIN = 100


def backfill_recommended(*, redelivered: int, missed_at_most: int) -> bool:
    """Whether to recommend a backfill over a reset that would re-deliver
    ``redelivered`` records to recover at most ``missed_at_most`` (definite +
    possible): only when something was missed, and the reset re-delivers more
    than ``REDELIVERY_RATIO`` times that and over ``REDELIVERY_MARGIN``
    records more (a few duplicates are cheaper than a Spark job)."""
    return (
        missed_at_most > 0
        and redelivered > REDELIVERY_RATIO * missed_at_most
        and redelivered - missed_at_most > REDELIVERY_MARGIN
    )


@dataclass(frozen=True)
class BackfillRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start

    def as_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "end": self.end,
                "count": self.count}


# Where a backfill's range ends. "bound": the sound upper end (the group's first
# commit; the current end for a finding taken without a commit yet). "likely":
# the likely start, an estimate; a repair to it closes as repaired to an estimate.
BACKFILL_UNTIL = ("bound", "likely")


@dataclass(frozen=True)
class MissedRange:
    """What a finding proved missed, as planning needs it (offsets next-to-read, ranges half-open).

    ``state``: the finding's state; ``start``: the first missed offset still
    stored; ``definite_end``: end of the definitely missed part; ``bound_end``:
    the sound upper end (the first commit), None while undecided or when nothing
    is left to replay; ``likely_start``: the estimate or None; ``high_watermark``:
    the end at the last observation."""

    topic: str
    partition: int
    state: str
    start: int
    definite_end: int
    bound_end: int | None
    likely_start: int | None
    high_watermark: int


@dataclass(frozen=True)
class PlannedBackfill:
    """One partition's planned range, split into records certainly missed
    (``definite``) and records the group may already have read (``possible``:
    re-delivered if it did); ``basis`` says where the end comes from."""

    range: BackfillRange
    definite: int
    possible: int
    basis: str

    def as_dict(self) -> dict:
        return {**self.range.as_dict(), "definite": self.definite, "possible": self.possible, "basis": self.basis}


def _backfill_end(missed: MissedRange, until: str) -> tuple[int, str]:
    where = f"{missed.topic}[{missed.partition}]"
    if until == "likely":
        if missed.likely_start is None:
            raise PlanError(f"{where}: no likely start is known; backfill to the bound instead")
        return missed.likely_start, "likely start (an estimate)"
    if missed.bound_end is not None:
        return missed.bound_end, "first commit (a bound)"
    if missed.state == UNDECIDED:
        return missed.high_watermark, "current end (no commit yet, so no bound)"
    if missed.state in UNTAKEN:
        raise PlanError(f"{where}: nobody has taken the partition yet, so a backfill now cannot cover what the "
                        "group will skip when it does; reset it to earliest while the group is empty, or wait")
    raise PlanError(f"{where}: nothing to backfill ({missed.state}: no missed range is left to replay)")


def plan_backfill_of_findings(*, missed: list[MissedRange], until: str = "bound") -> list[PlannedBackfill]:
    """The default repair covers the sound range: ``[start, first commit)``, or
    to the current end while a taken partition has no commit; ``until="likely"``
    ends at the likely start instead. Refuses unknown ``until``, a partition
    nobody took, one with nothing left to replay, a likely start that is not
    known, and empty ranges."""
    if until not in BACKFILL_UNTIL:
        raise PlanError(f"unknown range end {until!r}: use bound or likely")
    planned = []
    for item in missed:
        end, basis = _backfill_end(item, until)
        (backfill_range,) = plan_backfill(ranges=[(item.topic, item.partition, item.start, end)])
        definite = max(0, min(end, item.definite_end) - item.start)
        planned.append(PlannedBackfill(backfill_range, definite, backfill_range.count - definite, basis))
    return sorted(planned, key=lambda p: (p.range.topic, p.range.partition))


def backfill_range_problem(*, partition: int, start: int, end: int) -> str | None:
    """Why ``[start, end)`` of ``partition`` is no range to backfill, or None:
    partitions and offsets are never negative, and a range holds one offset
    at least. The planner, the command line and the Spark job's spec ask here."""
    if partition < 0:
        return f"partition {partition} does not exist: partitions are never negative"
    if start < 0 or end <= start:
        return f"nothing to backfill in [{start}, {end})"
    return None


def plan_backfill(*, ranges: list[tuple[str, int, int | None, int | None]]) -> list[BackfillRange]:
    """Validate per-partition ``[start, end)`` ranges; refuse unknown or empty ones."""
    plans = []
    for topic, partition, start, end in sorted(ranges, key=lambda r: (r[0], r[1])):
        if start is None or end is None:
            raise PlanError(f"{topic}[{partition}]: the missed range is not known yet (the group has not committed)")
        problem = backfill_range_problem(partition=partition, start=start, end=end)
        if problem:
            raise PlanError(f"{topic}[{partition}]: {problem}")
        plans.append(BackfillRange(topic, partition, start, end))
    return plans
