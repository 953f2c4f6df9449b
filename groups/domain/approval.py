"""Pure rules of approving a selection of findings at once (issue 22, item
7): which finding a bulk approval refuses before planning it, and the
fingerprint of what its preview showed for one finding. No Django, no Kafka."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groups.domain.fingerprints import fingerprint
from groups.domain.triage import NOTHING_TO_REPAIR

# The plan fields a reset commits: the executor re-reads the log start, the
# high watermark and the group's position when it runs, so the counts beside
# them (re-delivered, skipped) inform and do not decide.
RESET_DECIDES = ("topic", "partition", "planned", "clamped")


def bulk_refusal(*, state: str, closed_reason: str | None, active_job: tuple[int, str, str] | None) -> str | None:
    """Why a bulk approval leaves this finding as it is, or None to plan it.

    ``closed_reason``: None while the finding is open; ``active_job``: (id,
    kind, status) of a job working on it, of any kind (a bulk action does not
    stack a second repair on a finding under one)."""
    if closed_reason is not None:
        return f"closed already ({closed_reason})"
    if state == NOTHING_TO_REPAIR:
        return "covered: the group read the new partition from its start; nothing to repair"
    if active_job is not None:
        job_id, kind, status = active_job
        return f"{kind} job {job_id} is {status} on it"
    return None


def approval_fingerprint(
    *, kind: str, params: Mapping, plan: Sequence[Mapping], findings: Sequence[tuple[int, str, int, int]],
) -> str:
    """The fingerprint of a previewed job, the one rule of single and bulk
    approvals: the kind, the job's parameters, what the plan would do (a
    backfill's ranges; a reset's planned offsets) and each finding's
    accounting, ``findings`` as (id, state, missed definite, missed
    possible). An approval whose fresh preview fingerprints differently was
    not what the screen showed (a poll re-accounted a finding, the values
    changed on screen). A plain hash, not a secret: it catches change, not
    forgery."""
    decided = [dict(row) if kind == "backfill" else {key: row.get(key) for key in RESET_DECIDES} for row in plan]
    shown = {"kind": kind, "params": dict(params), "plan": decided,
             "findings": sorted([list(finding) for finding in findings])}
    # Plain JSON, as the job row stores its params and plan (a value JSON cannot hold is a bug, not hashed text).
    return fingerprint(shown)
