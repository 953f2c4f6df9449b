"""What a verified job recovered for one finding, and how its closing reads.

Pure: no Django, no Kafka. Offsets are "the next message to read" and every
range is half-open ``[start, end)``. A finding's missed range still stored is
``[backfill_start, backfill_end)`` (None when nothing is left to replay).
"""

from __future__ import annotations

from dataclasses import dataclass

from groups.domain.sinks import HANDLER, KAFKA, PARQUET


@dataclass(frozen=True)
class Recovery:
    """``recovered``: missed messages the group now gets (replayed to a sink,
    or read again after a reset). ``redelivered``: for a reset, every message
    the group reads a second time, the recovered ones included; None for a
    backfill, which never moves the group. ``complete``: the repair covered
    the whole sound range (the finding closes as repaired); otherwise it
    closes as repaired to an estimate, and ``reason`` says what is not covered."""

    recovered: int
    redelivered: int | None
    reason: str
    complete: bool = True


def sink_description(sink: dict) -> str:
    """Where a backfill delivered, from its result's ``sink``, in words. A
    result written before the sink was built (the job failed early) has only
    the kind: its place is said to be unrecorded, never left blank."""
    kinds = {KAFKA: "Kafka topic", HANDLER: "handler", PARQUET: "parquet at"}
    kind = sink.get("kind")
    if kind not in kinds:
        return "an unknown sink"
    if kind == KAFKA:
        where = ", ".join(sorted(set((sink.get("topics") or {}).values())))
    else:
        where = sink.get("handler" if kind == HANDLER else "output") or ""
    return f"{kinds[kind]} {where}" if where else f"{kinds[kind].removesuffix(' at')} (not recorded)"


def reset_recovery(
    *, job_id: int, before: int | None, after: int, missed_start: int, missed_end: int | None,
) -> Recovery:
    """A reset from commit ``before`` to ``after``: the group reads
    ``[after, before)`` again (without a commit before, it starts at ``after``
    and reads nothing twice); the missed part of it is recovered. The sound
    range is ``[missed_start, missed_end)`` (``missed_end`` None: no bound yet,
    counted up to the definite end by the caller). The group reads on from
    ``after``, so the reset covers the whole range when ``after <= missed_start``."""
    redelivered = 0 if before is None else max(0, before - after)
    recovered = 0
    if missed_end is not None:
        end = missed_end if before is None else min(missed_end, before)
        recovered = max(0, end - max(after, missed_start))
    complete = after <= missed_start
    was = "no commit" if before is None else f"committed was {before}"
    reason = f"repaired by reset job {job_id}: offsets reset to {after} ({was})"
    if not complete:
        reason = (f"repaired to an estimate by reset job {job_id}: offsets reset to {after} ({was}); "
                  f"the missed range from {missed_start} to {after} is not covered")
    if redelivered:
        reason += f"; {redelivered} messages re-delivered, {recovered} of them missed before"
    elif recovered:
        reason += f"; {recovered} missed messages delivered"
    return Recovery(recovered=recovered, redelivered=redelivered, reason=reason, complete=complete)


def backfill_recovery(
    *, job_id: int, partition_report: dict, destination: str, planned: tuple[int, int],
    sound: tuple[int, int | None],
) -> Recovery:
    """One partition of a verified backfill's result: the records it delivered
    recover that many missed messages; explained gaps are named. It covers the
    whole sound range ``sound`` (end None: the group has not committed, so no
    bound) only when the ``planned`` range reaches from its start to its end."""
    delivered, expected = partition_report["delivered"], partition_report["expected"]
    (start, end), (sound_start, sound_end) = planned, sound
    complete = sound_end is not None and start <= sound_start and end >= sound_end
    how = "repaired" if complete else "repaired to an estimate"
    reason = f"{how} by backfill job {job_id}: {delivered} of {expected} records replayed to {destination}"
    explained = partition_report.get("explained") or {}
    if explained:
        reason += "; " + ", ".join(f"{count} {cause.replace('_', ' ')}" for cause, count in sorted(explained.items()))
    if sound_end is None:
        reason += f"; the group had not committed, so nothing bounds what it skipped from {end} on"
    else:
        if start > sound_start:
            reason += f"; [{sound_start}, {start}) missed and not covered"
        if end < sound_end:
            reason += f"; [{end}, {sound_end}) possibly missed and not covered"
    return Recovery(recovered=delivered, redelivered=None, reason=reason, complete=complete)
