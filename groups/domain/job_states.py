"""The one vocabulary of a job's status, for both kinds of job: a
remediation (an offset reset or a backfill, ``RemediationJob``) and an
expansion (``ExpansionJob``). Which statuses a kind has, which are active,
cancellable or finished, and the moves each kind allows (``MOVES``, the
table): both models' choices and the one compare-and-set move
(``groups.services.job_status.job_status_move``) take them from here, and
the pages say each status in the words of ``STATUS_WORDS``.
"""

from __future__ import annotations

from typing import Literal

JobStatus = Literal["requested", "approved", "queued", "waiting", "running", "succeeded", "succeeded_with_loss",
                    "failed", "cancelled", "refused"]

REQUESTED: JobStatus = "requested"  # waiting for a second approver (an expansion always; a remediation under FOUR_EYES)
APPROVED: JobStatus = "approved"  # approved, not taken by a worker yet
QUEUED: JobStatus = "queued"  # a worker took it (a remediation; a backfill waiting for a Spark slot stays here)
WAITING: JobStatus = "waiting"  # a reset whose group still has members, tried again after each poll
RUNNING: JobStatus = "running"
SUCCEEDED: JobStatus = "succeeded"  # it did what was planned, verified; an expansion: nothing lost for every group
# An expansion that carried out every step but whose verdicts name offsets left unrepaired. A word of its own,
# not "failed": nothing stopped it, and every group's verdict says what it lost.
SUCCEEDED_WITH_LOSS: JobStatus = "succeeded_with_loss"
FAILED: JobStatus = "failed"  # it stopped; ``error`` (and an expansion's verdicts) say what it left undone
CANCELLED: JobStatus = "cancelled"  # a person cancelled a remediation before it ran; its findings stay open
REFUSED: JobStatus = "refused"  # the approver refused an expansion (or its requester withdrew it); nothing changed

STATUSES: tuple[JobStatus, ...] = (REQUESTED, APPROVED, QUEUED, WAITING, RUNNING, SUCCEEDED, SUCCEEDED_WITH_LOSS,
                                   FAILED, CANCELLED, REFUSED)
FINISHED: tuple[JobStatus, ...] = (SUCCEEDED, SUCCEEDED_WITH_LOSS, FAILED, CANCELLED, REFUSED)
# Ended without doing what was planned: a remediation's findings stay open, an expansion's topic is as it was.
UNDONE: tuple[JobStatus, ...] = (FAILED, CANCELLED, REFUSED)

# What a page says of each status. "done with loss": "succeeded" beside a loss would read as a contradiction.
STATUS_WORDS: dict[JobStatus, str] = {
    REQUESTED: "requested", APPROVED: "approved", QUEUED: "queued", WAITING: "waiting", RUNNING: "running",
    SUCCEEDED: "succeeded", SUCCEEDED_WITH_LOSS: "done with loss", FAILED: "failed", CANCELLED: "cancelled",
    REFUSED: "refused",
}

JobKind = Literal["remediation", "expansion"]
REMEDIATION: JobKind = "remediation"
EXPANSION: JobKind = "expansion"

# Per kind, from each status the statuses it may move to; a status with no row is an end.
MOVES: dict[JobKind, dict[JobStatus, tuple[JobStatus, ...]]] = {
    REMEDIATION: {
        REQUESTED: (APPROVED, CANCELLED),
        APPROVED: (QUEUED, CANCELLED),
        # A reset finds its group busy (waiting) or the cluster refusing it (failed) before it runs.
        QUEUED: (RUNNING, WAITING, FAILED, CANCELLED),
        WAITING: (RUNNING, FAILED, CANCELLED),
        # running -> running: a backfill or reset restarted after the worker running it died.
        RUNNING: (RUNNING, WAITING, SUCCEEDED, FAILED),
    },
    EXPANSION: {
        REQUESTED: (APPROVED, REFUSED),
        APPROVED: (RUNNING,),
        RUNNING: (SUCCEEDED, SUCCEEDED_WITH_LOSS, FAILED),
    },
}
# The audit action of a move is "<name>.<status>": "job.approved", "expansion.succeeded".
AUDIT_NAMES: dict[JobKind, str] = {REMEDIATION: "job", EXPANSION: "expansion"}


def kind_statuses(kind: JobKind) -> tuple[JobStatus, ...]:
    """Every status a job of ``kind`` can have, in the vocabulary's order."""
    moves = MOVES[kind]
    reached = set(moves) | {to for targets in moves.values() for to in targets}
    return tuple(status for status in STATUSES if status in reached)


def active(kind: JobKind) -> tuple[JobStatus, ...]:
    """The statuses of ``kind`` a job can still move from: it holds its findings or its topic."""
    return tuple(status for status in STATUSES if status in MOVES[kind])


def finished(kind: JobKind) -> tuple[JobStatus, ...]:
    """The statuses a job of ``kind`` ends in: no move leaves them."""
    return tuple(status for status in kind_statuses(kind) if status not in MOVES[kind])


def cancellable(kind: JobKind) -> tuple[JobStatus, ...]:
    """The statuses a person may cancel a job of ``kind`` from (none for an expansion: it is refused)."""
    return tuple(status for status in active(kind) if CANCELLED in MOVES[kind][status])


def move_allowed(kind: JobKind, from_status: str, to_status: str) -> bool:
    """Whether the table lets a job of ``kind`` move from ``from_status`` to ``to_status``."""
    return to_status in MOVES[kind].get(from_status, ())  # type: ignore[call-overload]


def move_stamps(to_status: str) -> tuple[str, ...]:
    """The moments a move records: ``started_at`` when the job starts running
    (again, after a restart), ``finished_at`` when it ends."""
    if to_status == RUNNING:
        return ("started_at",)
    if to_status in FINISHED:
        return ("finished_at",)
    return ()


def audit_action(kind: JobKind, to_status: str) -> str:
    """The audit row's action of a move to ``to_status``."""
    return f"{AUDIT_NAMES[kind]}.{to_status}"
