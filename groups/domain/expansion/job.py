"""The guarded expansion carried out (issue 33, items 2 to 4): the pure rules
of an expansion job. No Django, no Kafka.

- ``plan_fingerprint``: what approving a plan approves. The decisions only
  (the count, the broker's acceptance, each group's outcome and sink), not the
  produce rate or the estimates, which move with every poll.
- ``STEPS`` and ``next_step``: the job's steps in order; a re-run after a
  crash continues at the first one not done.
- ``group_verdict``: from what the job and the broker observed for one group,
  "nothing lost" or exactly which offsets of which partitions remain
  unrepaired, and why.

Offsets are "the next message to read"; every range is half-open ``[start, end)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from groups.domain.fingerprints import fingerprint
from groups.domain.job_states import SUCCEEDED, SUCCEEDED_WITH_LOSS, JobStatus

# The steps in order (item 4 of the issue):
# validate: CreatePartitions with validate_only, again, just before acting;
# protect: share groups set to share.auto.offset.reset=earliest (previous value recorded first);
# add_partitions: CreatePartitions;
# commit_empty: empty consumer groups committed at the new partitions' log start;
# watch: the new partitions watched until every share group initialised them
#        (then its config is restored) and every repaired-after group's finding is decided;
# backfills: each pre-approved backfill of a decided finding queued (within its maximum);
# verify: the backfills' verification awaited;
# verdict: one verdict per group.
STEPS = ("validate", "protect", "add_partitions", "commit_empty", "watch", "backfills", "verify", "verdict")
STEP_LABELS = {
    "validate": "the broker's verdict asked again (validate_only)",
    "protect": "share groups set to start new partitions at earliest",
    "add_partitions": "partitions added (CreatePartitions)",
    "commit_empty": "empty groups committed at the new partitions' log start",
    "watch": "new partitions watched until every group's start is decided; share configs restored",
    "backfills": "pre-approved backfills queued",
    "verify": "backfills verified",
    "verdict": "a verdict per group",
}


def next_step(done: Mapping[str, object]) -> str | None:
    """The first step of ``STEPS`` not in ``done`` (None: every step is done)."""
    for step in STEPS:
        if step not in done:
            return step
    return None


def plan_fingerprint(plan: Mapping) -> str:
    """The hash of what approving ``plan`` (the plan as JSON,
    ``expansion_plan_as_dict``) decides: topic, counts, the broker's
    acceptance, and per group its id, kind, outcome and sink. A plain hash:
    it catches change, not forgery."""
    decided = {
        "cluster": plan.get("cluster"), "topic": plan.get("topic"),
        "current_partitions": plan.get("current_partitions"), "new_partitions": plan.get("new_partitions"),
        "accepted": bool((plan.get("broker_verdict") or {}).get("accepted")),
        "groups": sorted(
            [[g.get("group"), g.get("kind"), g.get("outcome"), g.get("sink")] for g in plan.get("groups", [])],
            key=lambda row: str(row[0])),
    }
    return fingerprint(decided)


# --- The verdict per group --------------------------------------------------------------


@dataclass(frozen=True)
class PartitionFacts:
    """One new partition as observed for one group at the end of the job.

    ``log_start``: the partition's log start when the job looked. ``start``:
    where the group is known to have started it, from the broker (a commit
    the job made; a share group's start offset when the watcher decided
    nothing, an upper bound since it moves on as records are acknowledged):
    None when nothing tells or a decided finding does. ``missed``: a
    finding's sound range ``[start, end)`` of offsets the group may not have
    read (definitely and possibly missed); None when no finding says the
    group missed any. ``repaired``: a verified backfill covered ``missed``.
    ``left``: why a repair did not run (over the maximum, no sink, the
    backfill failed), "" when nothing was left. ``assumed``: the finding's
    policy is only assumed (latest), so ``missed`` is possibly, never
    definitely, unread: an earliest group that caught up quickly read it."""

    partition: int
    log_start: int
    start: int | None = None
    missed: tuple[int, int] | None = None
    repaired: bool = False
    left: str = ""
    assumed: bool = False


@dataclass(frozen=True)
class GroupFacts:
    group_id: str
    outcome: str  # the plan's, or "repaired_after" for an empty group that got a member back first
    partitions: Sequence[PartitionFacts] = field(default_factory=tuple)
    # Why the job could not act for the group (a protection refused, a config not restored), "" none.
    problem: str = ""
    # How a protected group was protected ("membership", "commit", "share_config"; "" none or not
    # recorded), and the sink its repairs wrote to.
    method: str = ""
    sink: str = ""


@dataclass(frozen=True)
class Unrepaired:
    partition: int
    start: int
    end: int
    why: str

    def as_dict(self) -> dict:
        return {"partition": self.partition, "start": self.start, "end": self.end, "why": self.why}


@dataclass(frozen=True)
class GroupVerdict:
    """``how``: "protected" (Gapwatch made the group start every new
    partition at its log start), "covered" (it did so by itself), "copied"
    (what its own application did not read was copied to its sink by a
    verified backfill), or "lost" (offsets remain unrepaired)."""

    group_id: str
    nothing_lost: bool
    words: str
    unrepaired: tuple[Unrepaired, ...] = ()
    how: str = "covered"

    def as_dict(self) -> dict:
        return {"nothing_lost": self.nothing_lost, "how": self.how, "words": self.words,
                "unrepaired": [u.as_dict() for u in self.unrepaired]}


def _partition_loss(p: PartitionFacts) -> Unrepaired | None:
    """What remains unrepaired on one partition, or None."""
    if p.missed is not None:
        start, end = p.missed
        if end <= start or p.repaired:
            return None
        why = p.left or "no verified backfill covered it"
        if p.assumed:
            why += "; possibly read: the group's policy is only assumed (latest), not known"
        return Unrepaired(p.partition, start, end, why)
    if p.start is not None and p.start > p.log_start:
        # Started above the log start with no finding to repair it: the range was never read.
        return Unrepaired(p.partition, p.log_start, p.start, p.left or "the group started above the log start")
    return None


def group_verdict(facts: GroupFacts) -> GroupVerdict:
    """Nothing lost, or the offsets that remain unrepaired, for one group.

    A group is whole when, on every new partition, it started at the log
    start (covered, protected) or the range it may have missed was replayed
    by a verified backfill (repaired). A problem the job met for the group
    (its config could not be restored, for instance) is said even when no
    record was lost."""
    losses = tuple(loss for loss in (_partition_loss(p) for p in facts.partitions) if loss is not None)
    if losses:
        total = sum(loss.end - loss.start for loss in losses)
        words = f"{total} offset(s) unrepaired on {len(losses)} partition(s)"
        assumed = {p.partition for p in facts.partitions if p.assumed}
        if assumed and all(loss.partition in assumed for loss in losses):
            words = (f"{total} offset(s) possibly unread, unrepaired, on {len(losses)} partition(s): its policy is "
                     "only assumed (latest); declared or seen earliest, it read them itself")
        if facts.problem:
            words += f"; {facts.problem}"
        return GroupVerdict(facts.group_id, False, words, losses, how="lost")
    copied = [p for p in facts.partitions if p.missed is not None and p.repaired and p.missed[1] > p.missed[0]]
    if copied:
        ranges = ", ".join(f"[{p.missed[0]}, {p.missed[1]}) of partition {p.partition}" for p in copied)
        # Under an assumed policy the range is only possibly unread (an earliest group read it itself).
        read = "may not have read" if any(p.assumed for p in copied) else "did not read"
        how, said = "copied", (f"copied to {facts.sink or 'its sink'}: the group's own application {read} "
                               f"offsets {ranges}; a verified backfill wrote them there")
    elif facts.outcome == "protected_before" and facts.method == "membership":
        how, said = "protected", ("protected: Gapwatch committed each new partition's log start as a member of the "
                                  "group before any of its members held it, so its own application reads every "
                                  "record")
    elif facts.outcome == "protected_before":
        how, said = "protected", "protected before: it started every new partition at its log start"
    elif facts.outcome == "covered":
        how, said = "covered", "covered: it started every new partition at its log start"
    else:
        how, said = "covered", "it missed nothing on the new partitions"
    words = f"nothing lost ({said})"
    if facts.problem:
        words += f"; but {facts.problem}"
    return GroupVerdict(facts.group_id, True, words, how=how)


def job_final_status(verdicts: Sequence[GroupVerdict]) -> JobStatus:
    """``succeeded`` when every group lost nothing, ``succeeded_with_loss`` otherwise."""
    return SUCCEEDED if all(v.nothing_lost for v in verdicts) else SUCCEEDED_WITH_LOSS
