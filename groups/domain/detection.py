"""The pure core: stored state plus one new Snapshot in, the Changes to write out.

``evaluate_snapshot`` implements DESIGN.md section 3 as a pure function: no
I/O, no clock reads (``now`` is passed in), nothing imported beyond the
standard library and ``groups.domain.snapshot``. Offsets mean "the next message to
read"; every range is half-open ``[start, end)``. For a finding on partition p:

- ``E``, ``H``, ``C``: log start, high watermark, committed offset at this poll;
- ``first_log_start``: E at the poll that created the finding;
- ``H_k`` (``pre_pickup_high_watermark``): H at the last poll where no member
  owned p and the group had no commit on p; None if no poll saw that;
- ``C_f`` (``first_commit``): the first committed offset seen on p, frozen.

Choices where DESIGN.md is silent:

- A topic recreated under a new topic id (or a deleted one reappearing) is a
  new lineage whose generation number continues at known + 1, so (group,
  topic, partition, generation) stays unique per name; all its partitions
  are "added", none "removed", and it opens no findings.
- Internal topics get generations recorded but never findings.
- Findings open only for known groups the snapshot lists: a group the cluster
  no longer lists has no members and no commits; should it come back, every
  partition is new to it, not only the added ones.
- Open findings on a topic deleted or recreated in this poll get no accounting
  (their offsets are gone) and are listed in ``closed_findings``.
- Findings given with ``closed`` set are final: no accounting, and a new
  finding with the same key is never created; an expired finding with
  nothing left to replay is listed in ``expired_findings`` (the service closes it).
- ``polls_without_owner`` counts consecutive polls with neither owner nor
  commit before the first commit; a poll where a member owns p resets it.
- A guard start offset decides at once, even before a first commit: it is
  exact, and its missed range ends at the guard's start, not at C_f.
- A gap whose missed range is empty (C_f at the first log start with no poll
  before pickup) is ``covered``: there is nothing to repair.
- ``expired`` counts missed offsets (definite and possible) below the current
  log start. Pending, unowned and covered findings have nothing missed, so
  they report 0 and never become ``expired``.
- ``policy_source`` is None while a finding is undecided (pending, unowned).

The pickup bracket (DESIGN section 3, "sharper evidence than polls"):

- ``pickup_after``: when the group descriptions of the last observation
  without owner or commit were requested; the group took p after it.
- ``pickup_before``: when the first observation with an owner or a commit
  ended; the group had taken p by then. Both come from every observation,
  full polls and the watcher's targeted snapshots alike.
- ``pickup_end`` (``PickupEnd``): an offset no lower than where a ``latest``
  member started, resolved by the poller after the fact from Kafka's time
  index at ``pickup_before`` plus a grace (a member fetches its start
  position just after it takes p). It narrows the possible range to
  ``[H_k, min(C_f, pickup_end))``; it never widens it (C_f is a hard bound)
  and never lowers the definite end (H_k is observed directly).
- A targeted snapshot (``Snapshot.scope``) deletes no topic outside its
  scope and does not count toward ``polls_without_owner``: "unowned after N
  polls" keeps meaning N full polls.

Over 400 lines on purpose: the rules above and the one pass that applies them
(``evaluate_snapshot`` and its helpers) are read together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from groups.domain.snapshot import GroupSnapshot, MemberSnapshot, PartitionOffsets, Snapshot, TopicSnapshot

Policy = Literal["unknown", "latest", "earliest"]
FindingStatus = Literal["pending", "unowned", "covered", "gap", "expired"]
PolicySource = Literal["declared", "evidenced", "guard", "assumed"]

DEFAULT_UNOWNED_AFTER_POLLS = 30


# --- Inputs -----------------------------------------------------------------


@dataclass(frozen=True)
class KnownTopic:
    """The latest stored partition generation of one topic name."""

    name: str
    topic_id: str
    generation: int
    partition_ids: frozenset[int]
    deleted: bool = False


@dataclass(frozen=True)
class KnownGroup:
    """A group as stored before this poll.

    ``consumed_topics``: topics on which the group had a committed offset, or
    a member assigned, at an earlier poll.
    """

    group_id: str
    consumed_topics: frozenset[str]
    declared_policy: Policy = "unknown"


@dataclass(frozen=True, order=True)
class FindingKey:
    group_id: str
    topic: str
    partition: int
    generation: int


@dataclass(frozen=True)
class FindingState:
    """The stored accounting of one finding, all the next poll needs."""

    key: FindingKey
    created_at: datetime
    first_log_start: int
    pre_pickup_high_watermark: int | None
    first_commit: int | None
    polls_without_owner: int
    state: FindingStatus
    guard_start_offset: int | None = None
    closed: bool = False
    pickup_after: datetime | None = None
    pickup_before: datetime | None = None
    pickup_end: int | None = None
    pickup_evidence: str = ""


@dataclass(frozen=True)
class PickupEnd:
    """Where a ``latest`` member started on p, at the latest: the first offset
    appended after ``pickup_before`` plus a grace, from Kafka's time index.
    ``evidence`` says which (e.g. "time index (LogAppendTime)")."""

    offset: int
    evidence: str


# --- Outputs ----------------------------------------------------------------


@dataclass(frozen=True)
class NewGeneration:
    topic: str
    topic_id: str
    generation: int
    partition_ids: frozenset[int]
    added_partitions: frozenset[int]
    removed_partitions: frozenset[int]
    # First sight of the name, or a new topic id: never produces findings.
    is_new_lineage: bool


@dataclass(frozen=True)
class FindingAccounting:
    """One finding after this poll: what it observed and what it concludes.

    ``missed_definite`` counts ``[first_log_start, H_k)``, ``missed_possible``
    ``[H_k, C_f)``; ``expired`` the missed offsets below the current log
    start; the backfill range is ``[backfill_start, backfill_end)``, None
    while unknown or when nothing is left to replay.
    """

    key: FindingKey
    created_at: datetime
    first_log_start: int
    log_start_offset: int
    high_watermark: int
    committed_offset: int | None
    lag: int
    owner_member_id: str | None
    owner_client_id: str | None
    owner_host: str | None
    pre_pickup_high_watermark: int | None
    first_commit: int | None
    polls_without_owner: int
    guard_start_offset: int | None
    missed_definite: int
    missed_possible: int
    expired: int
    backfill_start: int | None
    backfill_end: int | None
    policy_source: PolicySource | None
    state: FindingStatus
    explanation: str
    pickup_after: datetime | None = None
    pickup_before: datetime | None = None
    pickup_end: int | None = None
    pickup_evidence: str = ""

    def as_state(self) -> FindingState:
        """The stored state the next poll starts from."""
        return FindingState(
            key=self.key, created_at=self.created_at, first_log_start=self.first_log_start,
            pre_pickup_high_watermark=self.pre_pickup_high_watermark, first_commit=self.first_commit,
            polls_without_owner=self.polls_without_owner, state=self.state,
            guard_start_offset=self.guard_start_offset, pickup_after=self.pickup_after,
            pickup_before=self.pickup_before, pickup_end=self.pickup_end, pickup_evidence=self.pickup_evidence,
        )


@dataclass(frozen=True)
class StateTransition:
    key: FindingKey
    old_state: FindingStatus | None  # None: the finding was created by this poll
    new_state: FindingStatus


@dataclass(frozen=True)
class Changes:
    new_generations: tuple[NewGeneration, ...]
    deleted_topics: tuple[str, ...]
    # Keys of findings created by this poll; their accounting is in `accounting`.
    new_findings: tuple[FindingKey, ...]
    accounting: tuple[FindingAccounting, ...]
    # Open findings whose topic was deleted or recreated: the service closes them.
    closed_findings: tuple[FindingKey, ...]
    # Groups owning a finding's partition without a first commit: poll faster.
    groups_to_watch: frozenset[str]
    transitions: tuple[StateTransition, ...]
    # Open findings whose whole missed range retention deleted: nothing is left
    # to repair, so the service closes them as expired.
    expired_findings: tuple[FindingKey, ...] = ()


# --- Generations ------------------------------------------------------------


def diff_generation(*, known: KnownTopic | None, topic: TopicSnapshot) -> NewGeneration | None:
    """The generation ``topic`` starts, or None if its topic id and partition set are unchanged."""
    seen = topic.partition_ids
    new_lineage = known is None or known.deleted or known.topic_id != topic.topic_id
    if not new_lineage and seen == known.partition_ids:
        return None
    # A new lineage shares no partitions with the old one: all of its partitions are added.
    before = frozenset() if new_lineage else known.partition_ids
    return NewGeneration(
        topic=topic.name,
        topic_id=topic.topic_id,
        generation=1 if known is None else known.generation + 1,
        partition_ids=seen,
        added_partitions=seen - before,
        removed_partitions=before - seen,
        is_new_lineage=new_lineage,
    )


# --- One finding, one poll --------------------------------------------------


@dataclass(frozen=True)
class _Observation:
    """What this poll saw of a finding's partition and group."""

    log_start: int
    high_watermark: int
    committed: int | None
    owner: MemberSnapshot | None
    # A KIP-848 member holding p in its target but not yet in its assignment.
    assignee: MemberSnapshot | None = None
    # See Snapshot.groups_from / observed_until; complete: a full poll.
    groups_from: datetime | None = None
    observed_until: datetime | None = None
    complete: bool = True


@dataclass(frozen=True)
class _Verdict:
    state: FindingStatus
    policy_source: PolicySource | None
    explanation: str
    missed_definite: int = 0
    missed_possible: int = 0
    # The missed range is [first_log_start, missed_end); None: nothing missed.
    missed_end: int | None = None


def _record_evidence(*, finding: FindingState, seen: _Observation) -> FindingState:
    """Advance H_k, C_f, the pickup bracket and the no-owner count by one observation."""
    if finding.first_commit is not None:
        # Frozen: later commits say nothing about where the group started.
        return finding
    if seen.committed is None and seen.owner is None:
        return replace(
            finding,
            pre_pickup_high_watermark=seen.high_watermark,
            pickup_after=seen.groups_from,
            polls_without_owner=finding.polls_without_owner + (1 if seen.complete else 0),
        )
    # Taken: the first observation that shows it bounds the pickup from above.
    taken = replace(finding, pickup_before=finding.pickup_before or seen.observed_until)
    if seen.committed is not None:
        return replace(taken, first_commit=seen.committed)
    return replace(taken, polls_without_owner=0)


def _undecided_verdict(*, finding: FindingState, seen: _Observation, unowned_after_polls: int) -> _Verdict:
    """No commit yet: pending while picking up; unowned once nobody reads arriving data."""
    if seen.owner is not None:
        return _Verdict("pending", None, f"{seen.owner.client_id} owns the partition; waiting for its first commit")
    if seen.assignee is not None:
        return _Verdict(
            "pending", None, f"{seen.assignee.client_id} is being given the partition (target assignment); "
            f"{seen.high_watermark - seen.log_start} messages at risk",
        )
    unread = seen.high_watermark - seen.log_start
    if finding.polls_without_owner >= unowned_after_polls and unread > 0:
        return _Verdict(
            "unowned", None,
            f"no member has owned the partition for {finding.polls_without_owner} polls; {unread} messages unread",
        )
    return _Verdict("pending", None, f"no member owns the partition yet; {unread} messages at risk")


def _guard_verdict(*, finding: FindingState, guard_start: int) -> _Verdict:
    """The consumer-side guard reported where it started: the missed range is exact."""
    start = finding.first_log_start
    if guard_start <= start:
        return _Verdict("covered", "guard", f"the guard started at {guard_start}, at the log start: nothing missed")
    return _Verdict(
        "gap", "guard", f"the guard started at {guard_start}: [{start}, {guard_start}) missed",
        missed_definite=guard_start - start, missed_end=guard_start,
    )


def _evidence_verdict(*, first_commit: int, pre_pickup_high_watermark: int | None) -> _Verdict | None:
    """A first commit below H_k: a latest consumer starts at or above H_k, so this one did not."""
    if pre_pickup_high_watermark is None or first_commit >= pre_pickup_high_watermark:
        return None
    return _Verdict(
        "covered", "evidenced",
        f"first commit {first_commit} is below {pre_pickup_high_watermark}, the end before pickup: "
        "the group did not start at latest",
    )


def _pickup_window(finding: FindingState) -> str:
    """How the pickup end was found and how wide the pickup bracket was."""
    if finding.pickup_after is None or finding.pickup_before is None:
        return f"{finding.pickup_evidence} at the first observation of an owner"
    width = (finding.pickup_before - finding.pickup_after).total_seconds()
    return f"{finding.pickup_evidence}, pickup observed within {width:.1f}s"


def _possible_end(*, finding: FindingState, first_commit: int, definite_end: int) -> int:
    """min(C_f, pickup end), never below the definite end: both bound a latest start from above."""
    if finding.pickup_end is None:
        return max(definite_end, first_commit)
    return max(definite_end, min(first_commit, finding.pickup_end))


def _gap_verdict(*, finding: FindingState, first_commit: int, source: PolicySource, because: str) -> _Verdict:
    """Under latest: [E, H_k) definitely missed, [H_k, min(C_f, pickup end)) possibly missed; E for H_k without one."""
    start, before_pickup = finding.first_log_start, finding.pre_pickup_high_watermark
    definite_end = start if before_pickup is None else before_pickup
    possible_end = _possible_end(finding=finding, first_commit=first_commit, definite_end=definite_end)
    missed_definite = max(0, definite_end - start)
    missed_possible = possible_end - definite_end
    if before_pickup is None:
        because += "; no poll saw the partition before the group picked it up: nothing is definitely missed"
    if possible_end < first_commit:
        because += f"; started at or below {possible_end} ({_pickup_window(finding)}), first commit {first_commit}"
    if missed_definite + missed_possible == 0:
        return _Verdict("covered", source, f"{because}; the group started at the log start: nothing missed")
    return _Verdict(
        "gap", source,
        f"{because}: {missed_definite} definitely missed [{start}, {definite_end}), "
        f"{missed_possible} possibly missed [{definite_end}, {possible_end})",
        missed_definite=missed_definite, missed_possible=missed_possible, missed_end=possible_end,
    )


def _policy_verdict(*, finding: FindingState, first_commit: int, declared_policy: Policy) -> _Verdict:
    """Commits cannot tell latest from a quick earliest: a declaration decides, else latest is assumed."""
    if declared_policy == "earliest":
        return _Verdict("covered", "declared", f"declared earliest; first commit {first_commit} cannot tell otherwise")
    if declared_policy == "latest":
        return _gap_verdict(finding=finding, first_commit=first_commit, source="declared", because="declared latest")
    return _gap_verdict(
        finding=finding, first_commit=first_commit, source="assumed",
        because="policy not declared, assumed latest (the client default)",
    )


def _decide(
    *, finding: FindingState, seen: _Observation, declared_policy: Policy, unowned_after_polls: int
) -> _Verdict:
    """The rule that applies, strongest evidence first: guard, first commit below H_k, policy."""
    if finding.guard_start_offset is not None:
        return _guard_verdict(finding=finding, guard_start=finding.guard_start_offset)
    if finding.first_commit is None:
        return _undecided_verdict(finding=finding, seen=seen, unowned_after_polls=unowned_after_polls)
    evidenced = _evidence_verdict(
        first_commit=finding.first_commit, pre_pickup_high_watermark=finding.pre_pickup_high_watermark
    )
    return evidenced or _policy_verdict(
        finding=finding, first_commit=finding.first_commit, declared_policy=declared_policy
    )


def _expired_count(*, first_log_start: int, missed_end: int, log_start: int) -> int:
    """Missed offsets in [first_log_start, missed_end) that retention already deleted."""
    return max(0, min(log_start, missed_end) - first_log_start)


def _backfill_range(*, first_log_start: int, missed_end: int, log_start: int) -> tuple[int | None, int | None]:
    """[max(E, first_log_start), missed_end): the missed offsets still stored; (None, None) if none are."""
    start = max(log_start, first_log_start)
    return (start, missed_end) if start < missed_end else (None, None)


def _lag(seen: _Observation) -> int:
    """H - C with a commit; without one every stored message is unread: H - E."""
    return seen.high_watermark - (seen.log_start if seen.committed is None else seen.committed)


def _account_finding(
    *, finding: FindingState, seen: _Observation, declared_policy: Policy, unowned_after_polls: int,
    pickup_end: PickupEnd | None = None,
) -> FindingAccounting:
    """Fold one poll into ``finding``, decide it, and trim its missed range by retention."""
    finding = _record_evidence(finding=finding, seen=seen)
    if pickup_end is not None and finding.pickup_end is None and finding.pickup_before is not None:
        finding = replace(finding, pickup_end=pickup_end.offset, pickup_evidence=pickup_end.evidence)
    verdict = _decide(
        finding=finding, seen=seen, declared_policy=declared_policy, unowned_after_polls=unowned_after_polls
    )
    state, explanation, expired, backfill = verdict.state, verdict.explanation, 0, (None, None)
    if verdict.missed_end is not None:
        bounds = dict(
            first_log_start=finding.first_log_start, missed_end=verdict.missed_end, log_start=seen.log_start
        )
        expired, backfill = _expired_count(**bounds), _backfill_range(**bounds)
        if expired:
            state, explanation = "expired", f"{explanation}; {expired} already deleted by retention"
    owner = seen.owner
    return FindingAccounting(
        key=finding.key, created_at=finding.created_at, first_log_start=finding.first_log_start,
        log_start_offset=seen.log_start, high_watermark=seen.high_watermark, committed_offset=seen.committed,
        lag=_lag(seen),
        owner_member_id=owner.member_id if owner else None,
        owner_client_id=owner.client_id if owner else None,
        owner_host=owner.host if owner else None,
        pre_pickup_high_watermark=finding.pre_pickup_high_watermark, first_commit=finding.first_commit,
        polls_without_owner=finding.polls_without_owner, guard_start_offset=finding.guard_start_offset,
        missed_definite=verdict.missed_definite, missed_possible=verdict.missed_possible, expired=expired,
        backfill_start=backfill[0], backfill_end=backfill[1],
        policy_source=verdict.policy_source, state=state, explanation=explanation,
        pickup_after=finding.pickup_after, pickup_before=finding.pickup_before, pickup_end=finding.pickup_end,
        pickup_evidence=finding.pickup_evidence,
    )


# --- One poll ---------------------------------------------------------------


def _observe(
    *, key: FindingKey, offsets: dict[tuple[str, int], PartitionOffsets], groups: dict[str, GroupSnapshot],
    snapshot: Snapshot,
) -> _Observation | None:
    """The finding's partition and group in this snapshot; None if either is absent."""
    partition, group = offsets.get((key.topic, key.partition)), groups.get(key.group_id)
    if partition is None or group is None:
        return None
    return _Observation(
        log_start=partition.log_start,
        high_watermark=partition.high_watermark,
        committed=group.committed.get((key.topic, key.partition)),
        owner=group.owner_of(key.topic, key.partition),
        assignee=group.assignee_of(key.topic, key.partition),
        groups_from=snapshot.groups_from or snapshot.taken_at,
        observed_until=snapshot.observed_until or snapshot.taken_at,
        complete=snapshot.complete,
    )


def _new_findings(
    *, snapshot: Snapshot, generations: Iterable[NewGeneration], known_groups: Iterable[KnownGroup], now: datetime
) -> list[FindingState]:
    """One finding per added partition and per listed group that consumed the topic before this poll."""
    listed = {group.group_id for group in snapshot.groups}
    readers = sorted((g for g in known_groups if g.group_id in listed), key=lambda g: g.group_id)
    internal = {topic.name for topic in snapshot.topics if topic.is_internal}
    log_starts = {(t.name, p.partition): p.log_start for t in snapshot.topics for p in t.partitions}
    return [
        FindingState(
            key=FindingKey(group.group_id, generation.topic, partition, generation.generation),
            created_at=now, first_log_start=log_starts[(generation.topic, partition)],
            pre_pickup_high_watermark=None, first_commit=None, polls_without_owner=0, state="pending",
        )
        for generation in generations
        if not generation.is_new_lineage and generation.topic not in internal
        for group in readers
        if generation.topic in group.consumed_topics
        for partition in sorted(generation.added_partitions)
    ]


def evaluate_snapshot(
    *,
    snapshot: Snapshot,
    known_topics: Iterable[KnownTopic],
    known_groups: Iterable[KnownGroup],
    open_findings: Iterable[FindingState],
    now: datetime,
    unowned_after_polls: int = DEFAULT_UNOWNED_AFTER_POLLS,
    pickup_ends: Mapping[FindingKey, PickupEnd] | None = None,
) -> Changes:
    """Everything one snapshot changes (complete, or targeted at ``snapshot.scope``).

    1. Diff every topic against its known generation; known topics missing
       from the snapshot (within its scope) are deleted (a partial answer
       never reaches the core).
    2. Close open findings on topics deleted or recreated in this poll.
    3. Open findings, created at ``now``, on the added partitions.
    4. Account every open finding, new and existing, whose group, topic and
       partition are in the snapshot, and list its state transition.
    """
    known_topics, known_groups = list(known_topics), list(known_groups)
    known_by_name = {topic.name: topic for topic in known_topics}
    generations = tuple(
        generation
        for topic in snapshot.topics
        if (generation := diff_generation(known=known_by_name.get(topic.name), topic=topic)) is not None
    )
    listed_names = {topic.name for topic in snapshot.topics}
    in_scope = (lambda name: True) if snapshot.scope is None else snapshot.scope.__contains__
    deleted = tuple(sorted(
        t.name for t in known_topics if not t.deleted and t.name not in listed_names and in_scope(t.name)
    ))

    ended_lineages = set(deleted) | {g.topic for g in generations if g.is_new_lineage}
    open_findings = list(open_findings)
    still_open = [f for f in open_findings if not f.closed]
    closed = tuple(f.key for f in still_open if f.key.topic in ended_lineages)
    findings = {f.key: f for f in still_open if f.key.topic not in ended_lineages}
    # A closed finding (repaired, dismissed, expired) is final: never accounted
    # or created again; a new generation has new keys, so it still gets findings.
    known_keys = {f.key for f in open_findings}
    created = [
        f for f in _new_findings(snapshot=snapshot, generations=generations, known_groups=known_groups, now=now)
        if f.key not in known_keys
    ]
    findings.update((f.key, f) for f in created)

    offsets = {(t.name, p.partition): p for t in snapshot.topics for p in t.partitions}
    listed_groups = {group.group_id: group for group in snapshot.groups}
    policies = {group.group_id: group.declared_policy for group in known_groups}
    created_keys = {f.key for f in created}
    accounting, transitions = [], []
    for key, finding in findings.items():
        seen = _observe(key=key, offsets=offsets, groups=listed_groups, snapshot=snapshot)
        if seen is None:
            continue
        result = _account_finding(
            finding=finding, seen=seen, declared_policy=policies.get(key.group_id, "unknown"),
            unowned_after_polls=unowned_after_polls, pickup_end=(pickup_ends or {}).get(key),
        )
        accounting.append(result)
        old_state = None if key in created_keys else finding.state
        if old_state != result.state:
            transitions.append(StateTransition(key, old_state, result.state))

    return Changes(
        new_generations=generations,
        deleted_topics=deleted,
        new_findings=tuple(f.key for f in created),
        accounting=tuple(accounting),
        closed_findings=closed,
        groups_to_watch=frozenset(
            a.key.group_id for a in accounting if a.state == "pending" and a.owner_member_id is not None
        ),
        transitions=tuple(transitions),
        expired_findings=tuple(a.key for a in accounting if a.state == "expired" and a.backfill_start is None),
    )
