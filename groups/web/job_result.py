"""A job's stored result as the job page shows it: tables and readable
times, never the raw dictionary. Reads only what the executors wrote
(tasks/offset_reset.py, tasks/backfill/runner.py); keys it does not know are
left out rather than dumped."""

from __future__ import annotations

from datetime import datetime

from groups.domain.lifecycle import sink_description
from groups.models import RemediationJob
from groups.text import duration_words


def moment(value: object) -> datetime | None:
    """An ISO time string from a result as a datetime (the template formats it)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _backfill_rows(result: dict) -> list[dict]:
    rows = []
    for p in result.get("partitions", []):
        explained = p.get("explained") or {}
        rows.append({
            "topic": p.get("topic"), "partition": p.get("partition"),
            "range": f"[{p.get('start')}, {p.get('end')})", "expected": p.get("expected"),
            "delivered": p.get("delivered"), "explained": sum(explained.values()),
            "explained_by": ", ".join(f"{n} {cause.replace('_', ' ')}" for cause, n in sorted(explained.items())),
            "missing": p.get("unexplained", 0), "problems": "; ".join(p.get("problems") or []),
        })
    return rows


def _reset_rows(result: dict) -> list[dict]:
    return [
        {"topic": p.get("topic"), "partition": p.get("partition"), "before": p.get("before"),
         "planned": p.get("planned"), "after": p.get("after"),
         "redelivered": max(0, p["before"] - p["after"]) if p.get("before") is not None
         and p.get("after") is not None else 0,
         "equal": p.get("after") == p.get("planned")}
        for p in result.get("partitions", [])
    ]


def job_result_view(job: RemediationJob) -> dict:
    """``facts`` (label, value) pairs, ``rows`` per partition, ``attempts``
    with parsed times; empty when the job has no result yet."""
    result = job.result or {}
    facts: list[tuple[str, object]] = []
    if job.kind == RemediationJob.Kind.RESET:
        rows = _reset_rows(result)
        if "verified" in result:
            facts.append(("Read back equal to the plan", "yes" if result["verified"] else "no"))
        if moment(result.get("verified_at")):
            facts.append(("Verified at", moment(result["verified_at"])))
        if result.get("approval_to_verified_seconds") is not None:
            facts.append(("Approval to verified", duration_words(result["approval_to_verified_seconds"])))
        if moment(result.get("waiting_since")):
            facts.append(("Waiting since", moment(result["waiting_since"])))
            facts.append(("Checks while waiting", result.get("checks", 0)))
    else:
        rows = _backfill_rows(result)
        if result.get("sink"):
            facts.append(("Delivered to", sink_description(result["sink"])))
        if "expected" in result:
            facts.append(("Records", f"{result.get('delivered', 0)} delivered of {result['expected']} expected"))
        if result.get("seconds") is not None:
            facts.append(("Took", duration_words(result["seconds"])))
    attempts = [
        {**attempt, "started": moment(attempt.get("started_at")), "ended": moment(attempt.get("ended_at"))}
        for attempt in result.get("attempts", [])
    ]
    return {"facts": facts, "rows": rows, "attempts": attempts}
