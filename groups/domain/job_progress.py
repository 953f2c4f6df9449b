"""A running backfill's progress per stage, in words a person reads: records
done of total, the rate so far and an estimate of the time left.

Pure: the runner (``tasks.backfill.runner``) turns what the job's progress
file says into stages (``backfill_stages``); the job page turns them into
lines (``stage_lines``) with ``now`` passed in. Records done during the read
and write are an estimate too: Spark reports finished tasks, each holding a
near-equal share of the range (``adapters.spark.progress``); the read and the
write are one pass, so records read and records written are the same count.
"""

from __future__ import annotations

from dataclasses import dataclass

# The stages of a backfill, in order, and the job's phases that begin each.
READ_WRITE = "read and write"
VERIFY = "verify"
EXPLAIN_PUBLISH = "explain and publish"
STAGE_OF_PHASE = {"writing": READ_WRITE, "verifying": VERIFY, "staged": EXPLAIN_PUBLISH}
DONE = "done"


def backfill_stages(*, phases: dict[str, float], phase: str, done: int, total: int, at: float) -> list[dict]:
    """The stages so far from the job's progress: ``phases`` (when each phase
    began, epoch seconds), the current ``phase`` and its ``done`` of ``total``
    records at ``at``. A stage ends where the next begins, or at ``done``.
    Verifying and explaining go over the range as a whole: none of it is
    done until they end."""
    begun = sorted((started, STAGE_OF_PHASE[name]) for name, started in phases.items() if name in STAGE_OF_PHASE)
    stages = []
    for index, (started, name) in enumerate(begun):
        following = begun[index + 1][0] if index + 1 < len(begun) else None
        finished = following is not None or phase == DONE
        end = following if following is not None else at
        records = total if finished else (done if name == READ_WRITE else 0)
        stages.append({"name": name, "started": started, "at": end, "done": records, "total": total,
                       "finished": finished})
    return stages


@dataclass(frozen=True)
class StageLine:
    name: str
    done: int
    total: int
    seconds: float
    finished: bool
    # Records per second so far; None before the first record.
    rate: float | None
    # Seconds left at that rate (an estimate); None when finished or no rate yet.
    left_estimate: float | None


def stage_lines(stages: list[dict], *, now: float) -> list[StageLine]:
    """One line per stage: a finished stage's own time and rate; a running
    one's time so far (to ``now``), its rate so far and, at that rate, the
    time its remaining records take."""
    lines = []
    for stage in stages:
        end = stage["at"] if stage["finished"] else now
        seconds = max(0.0, end - stage["started"])
        rate = stage["done"] / seconds if stage["done"] and seconds > 0 else None
        left = None
        if not stage["finished"] and rate:
            left = max(0, stage["total"] - stage["done"]) / rate
        lines.append(StageLine(name=stage["name"], done=stage["done"], total=stage["total"], seconds=seconds,
                               finished=stage["finished"], rate=rate, left_estimate=left))
    return lines
