"""Pure accounting of a backfill's result: which missing offsets are
explained (and by what), one partition's report, and the job's summary.

No Django, no Kafka: the runner (``tasks.backfill.runner``) reads the cluster
and the Spark job's result files and hands the plain numbers to these
functions. Offsets are "next to read"; every range is half-open ``[start, end)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from groups.domain.planning import BackfillRange
from groups.domain.read_isolation import READ_COMMITTED, READ_UNCOMMITTED

# Causes that explain a missing offset; "not_delivered" is the one that does not.
CAUSES = ("retention", "aborted_transaction", "transaction_markers", "compaction_or_markers")
# Missing ranges listed per partition in job.result (the counts are always exact).
MISSING_RANGES_LISTED = 200


def _subtract(pieces: list[tuple[int, int]], runs: Iterable[tuple[int, int]]) -> tuple[list, list]:
    """Split ``pieces`` (sorted, disjoint) into the parts covered by ``runs``
    (sorted, disjoint) and the parts not covered."""
    runs = list(runs)
    covered, rest = [], []
    for start, end in pieces:
        cursor = start
        for run_start, run_end in runs:
            if run_end <= cursor or run_start >= end:
                continue
            if run_start > cursor:
                rest.append((cursor, run_start))
            covered.append((max(cursor, run_start), min(end, run_end)))
            cursor = min(end, run_end)
            if cursor >= end:
                break
        if cursor < end:
            rest.append((cursor, end))
    return covered, rest


def explain_missing(
    *, holes: list[tuple[int, int]], log_start: int, committed_runs: Iterable[tuple[int, int]] = (),
    uncommitted_runs: Iterable[tuple[int, int]] = (), compacted: bool = False, isolation: str = READ_COMMITTED,
) -> list[tuple[int, int, str]]:
    """Label every missing offset range with its cause; "not_delivered" is
    the one cause that does not explain anything.

    1. Below ``log_start`` (read after the job): retention.
    2. Above it, readable now by a reader of the job's ``isolation``:
       not_delivered (for read_uncommitted: ``uncommitted_runs``).
    3. read_committed only: readable only by a read_uncommitted reader:
       aborted_transaction.
    4. Readable by neither: compaction_or_markers on a compacted topic,
       otherwise transaction_markers (nothing else leaves a hole above the
       log start of a delete-only topic).
    """
    labelled: list[tuple[int, int, str]] = []
    above: list[tuple[int, int]] = []
    for start, end in holes:
        if start < log_start:
            labelled.append((start, min(end, log_start), "retention"))
        if end > log_start:
            above.append((max(start, log_start), end))
    if isolation == READ_UNCOMMITTED:
        # Aborted records are records to this reader: one the sink lacks was not delivered.
        lost, invisible = _subtract(above, uncommitted_runs)
        aborted: list[tuple[int, int]] = []
    else:
        lost, rest = _subtract(above, committed_runs)
        aborted, invisible = _subtract(rest, uncommitted_runs)
    labelled += [(a, b, "not_delivered") for a, b in lost]
    labelled += [(a, b, "aborted_transaction") for a, b in aborted]
    invisible_cause = "compaction_or_markers" if compacted else "transaction_markers"
    labelled += [(a, b, invisible_cause) for a, b in invisible]
    return sorted(labelled)


def records_in(runs: Iterable[tuple[int, int]]) -> int:
    """How many records runs of consecutive offsets (half-open) hold."""
    return sum(end - start for start, end in runs)


@dataclass
class PreparedRange:
    """A planned range with what the cluster said before the job: the read
    starts at the log start if retention already passed the planned start."""

    range: BackfillRange
    log_start: int
    high_watermark: int

    @property
    def read_start(self) -> int:
        return min(max(self.range.start, self.log_start), self.range.end)

    @property
    def to_read(self) -> int:
        return self.range.end - self.read_start


def partition_report(
    prepared: PreparedRange, summary: dict | None, *, log_start_after: int, labelled: list[tuple[int, int, str]],
    records: int, isolation: str = READ_COMMITTED, compacted: bool = False,
) -> dict:
    """One partition of ``job.result``: counts, the missing offsets by cause,
    and what is unexplained.

    ``records``: how many records a reader of ``isolation`` reads now in
    ``[max(read start, log_start_after), end)`` (the verification's own read:
    markers never, aborted records only for read_uncommitted). ``expected`` is
    records, not offsets: those, plus what the sink got below the log start
    before retention took it. The sink must hold exactly as many records
    there as the reader sees: more means records no reader of that isolation
    sees (aborted ones, for read_committed) were delivered; on a compacted
    topic more may only mean compaction removed records since the job.
    ``offsets`` is the planned span."""
    plan = prepared.range
    missing_ranges = []
    if prepared.read_start > plan.start:
        missing_ranges.append((plan.start, prepared.read_start, "retention"))
    missing_ranges += labelled
    explained = {cause: 0 for cause in CAUSES}
    not_delivered = 0
    for start, end, cause in missing_ranges:
        if cause == "not_delivered":
            not_delivered += end - start
        else:
            explained[cause] += end - start
    delivered = summary["delivered"] if summary else 0
    duplicates = summary["duplicates"] if summary else 0
    outside = summary["outside_range"] if summary else 0
    unlisted = 0
    if summary and summary.get("holes_truncated"):
        listed = sum(end - start for start, end in summary["holes"])
        unlisted = summary["missing"] - listed
    counted_from = min(max(prepared.read_start, log_start_after), plan.end)
    holes_below = sum(max(0, min(end, counted_from) - start)
                      for start, end in (summary["holes"] if summary else []) if start < counted_from)
    delivered_below = (counted_from - prepared.read_start) - holes_below if summary else 0
    delivered_counted = delivered - delivered_below
    unseen = delivered_counted - records
    problems = []
    if not_delivered:
        problems.append(f"{not_delivered} offsets readable now were not delivered")
    if unlisted:
        problems.append(f"{unlisted} missing offsets beyond the first holes listed were not classified")
    if duplicates:
        problems.append(f"{duplicates} duplicate records")
    if outside:
        problems.append(f"{outside} records outside the range")
    if unseen > 0 and not compacted:
        what = "records of aborted transactions" if isolation == READ_COMMITTED else "offsets that hold no record"
        problems.append(f"{unseen} records delivered that a {isolation} reader does not read ({what})")
    elif unseen < 0 and not (not_delivered or unlisted):
        problems.append(f"{-unseen} records a {isolation} reader reads were not delivered")
    accounted = delivered + sum(explained.values()) + not_delivered + unlisted
    if accounted != plan.count:
        problems.append(f"counts do not add up: {accounted} accounted for, {plan.count} expected")
    return {
        "topic": plan.topic, "partition": plan.partition, "start": plan.start, "end": plan.end,
        "offsets": plan.count, "isolation": isolation,
        "expected": delivered_below + records, "delivered": delivered, "read_start": prepared.read_start,
        "log_start_before": prepared.log_start, "log_start_after": log_start_after,
        "high_watermark": prepared.high_watermark,
        "explained": {cause: count for cause, count in explained.items() if count},
        "unexplained": not_delivered + unlisted + duplicates + outside + (max(0, unseen) if not compacted else 0),
        "problems": problems,
        "missing_ranges": [{"start": a, "end": b, "cause": c} for a, b, c in _merged(missing_ranges)
                           ][:MISSING_RANGES_LISTED],
    }


def report_explained(report: list[dict]) -> bool:
    """Whether every partition of a report is accounted for: nothing
    unexplained and no problem. Only such an output is published, and only
    such a job succeeds."""
    return not any(p["unexplained"] or p["problems"] for p in report)


def _merged(labelled: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    merged: list[tuple[int, int, str]] = []
    for start, end, cause in sorted(labelled):
        if merged and merged[-1][1] == start and merged[-1][2] == cause:
            merged[-1] = (merged[-1][0], end, cause)
        else:
            merged.append((start, end, cause))
    return merged




def summary_line(report: list[dict]) -> str:
    expected = sum(p["expected"] for p in report)
    delivered = sum(p["delivered"] for p in report)
    offsets = sum(p.get("offsets", p["expected"]) for p in report)
    # Offsets are not records once markers or aborted records are in a range: both are said.
    parts = [f"delivered {delivered} of {expected} records" + (f" ({offsets} offsets)" if offsets != expected else "")]
    for p in report:
        for cause, count in p["explained"].items():
            parts.append(f"{p['topic']}[{p['partition']}]: {count} {cause.replace('_', ' ')}")
    return "; ".join(parts)
