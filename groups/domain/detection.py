"""The pure core: stored state plus one new Snapshot in, the Changes to write out.

``evaluate_snapshot`` implements DESIGN.md section 3 as a pure function: no
I/O, no clock reads (``now`` is passed in), nothing imported beyond the
standard library, ``groups.domain.snapshot``, ``groups.domain.group_kinds`` and
``groups.domain.read_isolation`` (the one rule of which isolation a group reads with).
Offsets mean "the next message to read"; every range is half-open ``[start, end)``. For a finding on partition p:

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
- Findings open only for groups the snapshot lists: a group the cluster no
  longer lists has no members and no commits; should it come back, every
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
  they report 0 and never become ``expired``; an undecided one (no missed
  range yet) counts it once its first commit decides it.
- ``policy_source`` is None while nobody took the partition (pending,
  unowned); an ``undecided`` finding names the policy its definite part assumes.

Bounds and estimates (DESIGN section 3, issue 26). A bound comes only from
what the broker observed; everything else is an estimate and named so:

- ``H_k`` bounds a ``latest`` start from below: the adapter reads watermarks
  before it describes groups, so a member that did not own p then starts at
  or above it. Once any observation saw p taken, ``H_k`` is frozen: a later
  observation without owner (the member left before committing) proves nothing
  about the first member's start.
- ``C_f`` bounds it from above: a ``latest`` member commits its position, which
  only grows from where it started (with default auto-commit the first commit
  comes about one interval after the start, so ``[S, C_f)`` is ~5 s of
  traffic; bench/RESULTS.md). It is the only
  upper bound: until a first commit is seen the finding is ``undecided`` and
  has no upper bound, no backfill range, and says what the operator can do.
- ``pickup_after`` / ``pickup_before``: the pickup bracket, when the last
  observation without owner or commit asked for group descriptions, and when
  the first one with an owner or a commit ended.
- ``likely_start`` (``LikelyStart``): an estimate of where a ``latest`` member
  started, from Kafka's time index at ``pickup_before`` plus a grace; producer
  clocks (CreateTime) and a slow member (an assignment callback, a JVM pause)
  both move it. It is kept inside ``[H_k, C_f]`` and shown with its evidence;
  it never narrows ``missed_possible`` or the default backfill range.
- A targeted snapshot (``Snapshot.scope``) deletes no topic outside its
  scope and does not count toward ``polls_without_owner``: "unowned after N
  polls" keeps meaning N full polls.
- A group that no earlier poll saw reading the topic still gets findings when
  the snapshot that finds the new partitions shows it was reading the topic
  before them (``read_before_change``): no silent miss for a group that
  joined seconds before the change.

Share groups (KIP-932, issue 25) are read with the same discipline. Their
position is the share-partition start offset (SPSO), the lowest offset the
group may still deliver; it only moves forward, so the first one observed
bounds the start from above exactly as a first commit does, and it exists
only once the group initialised the partition. Their policy is the group
config ``share.auto.offset.reset`` the cluster states (``GroupSnapshot.
reset_policy``), not a declaration: ``latest`` (the broker's default),
``earliest`` (covered) or ``by_duration:<ISO duration>``, a start found from
record timestamps: it may lie below H_k, so nothing is definitely missed,
``[E, C_f)`` is possibly missed, and a first position below H_k is no
evidence of being covered.

Protection by membership (issue 43): Gapwatch, as a member of the group,
committed p at its log start (``Protection``). Won (no member of the group
held p right after the commit, and it read back): whoever takes p looks up
that commit before ``auto.offset.reset``, so the group starts there whatever
its policy: ``covered``, a fact from the broker, whatever the observations
say; never evidence of the group's policy (the commit is Gapwatch's). Lost
(a member held p already): the finding runs as any other, and a commit equal
to Gapwatch's is taken as Gapwatch's, not as the group's first.

Over 400 lines on purpose: the rules above and the one pass that applies them
(``evaluate_snapshot`` and its helpers) are read together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from groups.domain.finding_states import COVERED, EXPIRED, GAP, PENDING, UNDECIDED, UNOWNED, FindingStatus
from groups.domain.group_kinds import EARLIEST_BY_DEFAULT, group_kind
from groups.domain.read_isolation import READ_UNCOMMITTED, reader_isolation
from groups.domain.snapshot import GroupSnapshot, MemberSnapshot, PartitionOffsets, Snapshot, TopicSnapshot

Policy = Literal["unknown", "latest", "earliest", "by_duration"]
Isolation = Literal["unknown", "read_committed", "read_uncommitted"]
PolicySource = Literal["declared", "evidenced", "guard", "assumed", "protected"]

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
    # Per partition, where a group starting at latest would have started when
    # a complete poll last sampled it (its last stable offset, at or below the
    # high watermark; read before that poll listed the groups), and that
    # poll's time: a group that did not exist then starts at or above it
    # (``first_start_evidence``). Empty: never sampled.
    floors: Mapping[int, int] = field(default_factory=dict, compare=False, hash=False)
    floors_at: datetime | None = None


@dataclass(frozen=True)
class KnownGroup:
    """A group as stored before this poll.

    ``consumed_topics``: topics on which the group had a committed offset, or
    a member assigned, at an earlier poll.
    """

    group_id: str
    consumed_topics: frozenset[str]
    declared_policy: Policy = "unknown"
    declared_isolation: Isolation = "unknown"
    # What the broker showed of the group's own starts (``PolicyEvidence``):
    # "earliest" (seen not starting at latest) or "latest"; decides where
    # nothing is declared. ``policy_evidence``: its words, for the verdicts.
    evidenced_policy: Policy = "unknown"
    policy_evidence: str = ""
    # When a poll first listed the group (None: never stored).
    first_seen_at: datetime | None = None


@dataclass(frozen=True)
class GroupRules:
    """How a group starts a partition it has no position on, and the words for it.

    ``setting``: the cluster's own setting in words (a share group's
    ``share.auto.offset.reset``), "" when an operator's declaration (or
    nothing) gives the policy. ``position``: what the group's stored position
    is called, a consumer group's commit or a share group's start offset."""

    policy: Policy = "unknown"
    setting: str = ""
    position: str = "commit"
    # The policy is the client framework's default, not stated by anyone:
    # its verdicts are "assumed" (an estimate, named so), not "declared".
    assumed: bool = False
    # The members' isolation.level as declared; the broker does not know it.
    # Only "read_uncommitted" lets a latest start be bounded by the high
    # watermark: a read_committed member starts at the last stable offset.
    isolation: Isolation = "unknown"
    # The policy was learnt from the group's own starts (``PolicyEvidence``),
    # in words: its verdicts are "evidenced".
    evidence: str = ""


def group_rules(*, group: GroupSnapshot | None, declared_policy: Policy,
                declared_isolation: Isolation = "unknown", evidenced_policy: Policy = "unknown",
                evidence: str = "") -> GroupRules:
    """The cluster's setting where the snapshot states one, else the
    declaration, else the group's own starts (``evidenced_policy``), else a
    framework's default (Connect sinks: consumer groups named
    ``connect-<name>``; streams groups), else nothing (latest assumed).
    The isolation is the declared one whatever decides the policy."""
    position = "start offset" if group is not None and group.type == "share" else "commit"
    if group is not None and group.reset_policy is not None:
        return GroupRules(policy=group.reset_policy, setting=group.reset_setting, position=position,
                          isolation=declared_isolation)
    if declared_policy == "unknown" and evidenced_policy in ("latest", "earliest"):
        return GroupRules(policy=evidenced_policy, position=position, isolation=declared_isolation,
                          evidence=evidence or f"seen starting at {evidenced_policy}")
    if declared_policy == "unknown" and group is not None:
        default = EARLIEST_BY_DEFAULT.get(group_kind(group.type, group.group_id))
        if default is not None:
            return GroupRules(policy="earliest", setting=f"assumed earliest, {default}", assumed=True,
                              isolation=declared_isolation)
    return GroupRules(policy=declared_policy, position=position, isolation=declared_isolation)


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
    pre_pickup_stable_offset: int | None = None
    pickup_after: datetime | None = None
    pickup_before: datetime | None = None
    likely_start: int | None = None
    likely_start_evidence: str = ""
    # On a topic's first-seen generation (``_first_sight_findings``): no
    # generation before it was seen, so whether p was added is not known.
    first_sight: bool = False


@dataclass(frozen=True)
class Protection:
    """Gapwatch's commit of ``offset`` on a partition as a member of the group
    (``won``: no member of the group held it then), and its ``words``."""

    offset: int
    won: bool
    words: str = ""


@dataclass(frozen=True)
class LikelyStart:
    """An estimate, never a bound: where a ``latest`` member probably started
    on p, the first offset appended after ``pickup_before`` plus a grace, from
    Kafka's time index. ``evidence`` says which timestamps (e.g. "time index
    (CreateTime)": producer clocks move it)."""

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
    ``[H_k, C_f)`` (both bounds observed by the broker) when the group's
    policy is known (declared, the cluster's setting, a guard report, the
    group's own starts); with ``latest`` only assumed nothing is definite and
    the whole sound range is possible, the figures under ``latest`` being
    ``missed_definite_if_latest`` and ``missed_possible_if_latest`` (None
    unless the policy is assumed); ``expired`` the missed
    offsets below the current log start; the backfill range is
    ``[backfill_start, backfill_end)``, None while there is no upper bound
    (``undecided``) or when nothing is left to replay. ``likely_start`` is an
    estimate inside ``[H_k, C_f]``, never used as a bound.
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
    likely_start: int | None = None
    likely_start_evidence: str = ""
    pre_pickup_stable_offset: int | None = None
    missed_definite_if_latest: int | None = None
    missed_possible_if_latest: int | None = None
    # FindingState.first_sight, carried (stored as the generation's is_new_lineage).
    first_sight: bool = False

    def as_state(self) -> FindingState:
        """The stored state the next poll starts from."""
        return FindingState(
            key=self.key, created_at=self.created_at, first_log_start=self.first_log_start,
            pre_pickup_high_watermark=self.pre_pickup_high_watermark, first_commit=self.first_commit,
            pre_pickup_stable_offset=self.pre_pickup_stable_offset,
            polls_without_owner=self.polls_without_owner, state=self.state,
            guard_start_offset=self.guard_start_offset, pickup_after=self.pickup_after,
            pickup_before=self.pickup_before, likely_start=self.likely_start,
            likely_start_evidence=self.likely_start_evidence, first_sight=self.first_sight,
        )


@dataclass(frozen=True)
class StateTransition:
    key: FindingKey
    old_state: FindingStatus | None  # None: the finding was created by this poll
    new_state: FindingStatus


@dataclass(frozen=True)
class PolicyEvidence:
    """What a group's own start on a partition proved of its policy
    (DESIGN section 3): ``earliest`` when it started below where a latest
    member could have (its first commit below the end before it took the
    partition, or a guard report at the log start while the end was higher),
    ``latest`` when a guard reported a start at or above that end. ``words``
    name the partition, the offsets and the finding's generation."""

    group_id: str
    policy: Policy
    words: str


@dataclass(frozen=True)
class Changes:
    new_generations: tuple[NewGeneration, ...]
    deleted_topics: tuple[str, ...]
    # Keys of findings created by this poll; their accounting is in `accounting`.
    new_findings: tuple[FindingKey, ...]
    accounting: tuple[FindingAccounting, ...]
    # Open findings whose topic was deleted or recreated: the service closes them.
    closed_findings: tuple[FindingKey, ...]
    # Groups of undecided findings (taken, no first commit yet): poll faster.
    groups_to_watch: frozenset[str]
    transitions: tuple[StateTransition, ...]
    # Open findings whose whole missed range retention deleted: nothing is left
    # to repair, so the service closes them as expired.
    expired_findings: tuple[FindingKey, ...] = ()
    # Groups whose own starts in this snapshot proved a policy other than the stored one.
    policy_evidence: tuple[PolicyEvidence, ...] = ()


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
    # The last stable offset beside the high watermark; None: not read.
    last_stable: int | None = None
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
    # (definite, possible) if the group starts at latest, as assumed; None: not assumed.
    if_latest: tuple[int, int] | None = None


def _record_evidence(*, finding: FindingState, seen: _Observation) -> FindingState:
    """Advance H_k, C_f, the pickup bracket and the no-owner count by one observation."""
    if finding.first_commit is not None:
        # Frozen: later commits say nothing about where the group started.
        return finding
    if seen.committed is None and seen.owner is None:
        counted = replace(finding, polls_without_owner=finding.polls_without_owner + (1 if seen.complete else 0))
        if finding.pickup_before is not None:
            # Taken before, let go without a commit: the first member may have read
            # from where it started, so H_k stays where that member could not own p.
            return counted
        return replace(counted, pre_pickup_high_watermark=seen.high_watermark, pickup_after=seen.groups_from,
                       pre_pickup_stable_offset=_stable_floor(finding=finding, seen=seen))
    # Taken: the first observation that shows it bounds the pickup from above.
    taken = replace(finding, pickup_before=finding.pickup_before or seen.observed_until)
    if seen.committed is not None:
        return replace(taken, first_commit=seen.committed)
    return replace(taken, polls_without_owner=0)


def _stable_floor(*, finding: FindingState, seen: _Observation) -> int:
    """L_k: the last stable offset of this observation, at most its high
    watermark. Not read: the last one recorded (the LSO only grows, so an
    earlier one is still below any later start), else the first log start."""
    if seen.last_stable is not None:
        return min(seen.last_stable, seen.high_watermark)
    if finding.pre_pickup_stable_offset is not None:
        return finding.pre_pickup_stable_offset
    return finding.first_log_start


def start_floor(*, finding: FindingState, rules: GroupRules) -> int | None:
    """The sound lower bound of a latest start, None where no observation
    before the pickup exists: H_k for a group declared read_uncommitted, else
    L_k (a read_committed member starts at the last stable offset, below H_k
    while a transaction is open; librdkafka's default isolation)."""
    high = finding.pre_pickup_high_watermark
    if high is None or reader_isolation(rules.isolation) == READ_UNCOMMITTED or finding.pre_pickup_stable_offset is None:
        return high
    return min(high, finding.pre_pickup_stable_offset)


def _open_transaction_words(*, finding: FindingState, rules: GroupRules, floor: int | None) -> str:
    """Why [L_k, H_k) is only possible: a transaction was open at the pickup."""
    high = finding.pre_pickup_high_watermark
    if floor is None or high is None or floor >= high:
        return ""
    why = "declared read_committed" if rules.isolation == "read_committed" else (
        "isolation not declared: read_committed, librdkafka's default, is assumed")
    return (f"; a transaction was open at the pickup: the last stable offset {floor} was below the end {high}, "
            f"and a read_committed member starts at the last stable offset ({why}), so [{floor}, {high}) is "
            "possibly, not definitely, missed")


ASSUMED_LATEST = "policy not declared, assumed latest (the client default)"
# Why an assumed policy proves nothing definite (DESIGN section 3).
NOT_DEFINITE = ("nothing is definitely missed: commits alone cannot tell latest from an earliest group that "
                "caught up within one commit interval")


def _latest_source(rules: GroupRules) -> tuple[PolicySource, str]:
    if rules.setting:
        return "declared", rules.setting
    if rules.evidence:
        return "evidenced", rules.evidence
    if rules.policy == "latest":
        return "declared", "declared latest"
    return "assumed", ASSUMED_LATEST


def _earliest_source(rules: GroupRules) -> tuple[PolicySource, str]:
    """Who says the group starts at earliest, and in which words."""
    if rules.assumed:
        return "assumed", rules.setting
    if rules.evidence:
        return "evidenced", rules.evidence
    return "declared", rules.setting or "declared earliest"


def _first_sight_words(finding: FindingState) -> str:
    """What a finding on a topic's first-seen generation cannot know."""
    if not finding.first_sight:
        return ""
    return ("; the topic was first seen with this partition already read: no earlier generation was observed, so "
            "whether it was added later and where the group started on it are not known")


def _undecided_verdict(
    *, finding: FindingState, seen: _Observation, rules: GroupRules, unowned_after_polls: int
) -> _Verdict:
    """No commit yet. Not taken: pending (every message at risk), or unowned once
    nobody reads arriving data. Taken: undecided, with no upper bound on where
    the group started until its first commit."""
    unread = seen.high_watermark - seen.log_start
    if finding.pickup_before is not None:
        return _taken_uncommitted_verdict(finding=finding, seen=seen, rules=rules)
    if seen.assignee is not None:
        return _Verdict(
            PENDING, None, f"{seen.assignee.client_id} is being given the partition (target assignment); "
            f"{unread} messages at risk",
        )
    if finding.polls_without_owner >= unowned_after_polls and unread > 0:
        return _Verdict(
            UNOWNED, None,
            f"no member has owned the partition for {finding.polls_without_owner} polls; {unread} messages unread",
        )
    return _Verdict(PENDING, None, f"no member owns the partition yet; {unread} messages at risk")


def _taken_uncommitted_verdict(*, finding: FindingState, seen: _Observation, rules: GroupRules) -> _Verdict:
    """Taken without a first commit: [E, H_k) is missed under latest, but nothing
    the broker observed bounds the start from above. Undecided, with the choices.
    A start from record timestamps (by_duration) may lie below H_k: nothing definite."""
    who = seen.owner.client_id if seen.owner is not None else "a member"
    position = rules.position
    choices = (f"no upper bound on where it started until its first {position}: backfill to the current end, "
               f"reset to earliest while the group is empty, or wait for the {position}")
    if rules.policy == "earliest":
        source, said = _earliest_source(rules)
        return _Verdict(UNDECIDED, source, f"{who} took the partition ({said}); {choices}")
    if rules.policy == "by_duration":
        return _Verdict(UNDECIDED, "declared", f"{who} took the partition, no {position} yet; {rules.setting}: "
                        f"the start comes from record timestamps, so nothing is definitely missed; {choices}")
    source, because = _latest_source(rules)
    start, before_pickup = finding.first_log_start, start_floor(finding=finding, rules=rules)
    definite_end = start if before_pickup is None else max(start, before_pickup)
    missed = (f"{definite_end - start} definitely missed [{start}, {definite_end})"
              f"{_open_transaction_words(finding=finding, rules=rules, floor=before_pickup)}")
    if source == "assumed":
        return _Verdict(
            UNDECIDED, source,
            f"{who} took the partition, no {position} yet; {because}: {NOT_DEFINITE}; if the group starts at "
            f"latest, as assumed: {missed}; {choices}{_first_sight_words(finding)}",
            if_latest=(definite_end - start, 0),
        )
    return _Verdict(
        UNDECIDED, source,
        f"{who} took the partition, no {position} yet; {because}: {missed}, then {choices}"
        f"{_first_sight_words(finding)}",
        missed_definite=definite_end - start,
    )


def _guard_verdict(*, finding: FindingState, guard_start: int) -> _Verdict:
    """The consumer-side guard reported where it started: the missed range is exact."""
    start = finding.first_log_start
    if guard_start <= start:
        return _Verdict(COVERED, "guard", f"the guard started at {guard_start}, at the log start: nothing missed")
    return _Verdict(
        GAP, "guard", f"the guard started at {guard_start}: [{start}, {guard_start}) missed",
        missed_definite=guard_start - start, missed_end=guard_start,
    )


def _evidence_verdict(*, first_commit: int, floor: int | None, position: str, stable: bool) -> _Verdict | None:
    """A first commit below the start floor (H_k, or L_k for a group that may
    read committed only): a latest consumer starts at or above it, so this one did not."""
    if floor is None or first_commit >= floor:
        return None
    what = "the last stable offset" if stable else "the end"
    return _Verdict(
        COVERED, "evidenced",
        f"first {position} {first_commit} is below {floor}, {what} before pickup: "
        "the group did not start at latest",
    )


def likely_within(*, likely: int | None, definite_end: int, first_commit: int | None) -> int | None:
    """The estimate kept inside what the broker proved: [H_k, C_f]."""
    if likely is None:
        return None
    likely = max(likely, definite_end)
    return likely if first_commit is None else min(likely, first_commit)


def _likely_words(finding: FindingState, likely: int) -> str:
    """The estimate, its evidence and how wide the pickup bracket was."""
    said = f"likely start {likely} (an estimate: {finding.likely_start_evidence}"
    if finding.pickup_after is not None and finding.pickup_before is not None:
        said += f", pickup observed within {(finding.pickup_before - finding.pickup_after).total_seconds():.1f}s"
    return said + ")"


def _gap_verdict(
    *, finding: FindingState, first_commit: int, source: PolicySource, because: str, rules: GroupRules
) -> _Verdict:
    """Under latest: [E, F) definitely missed, [F, C_f) possibly missed, F the
    start floor (``start_floor``: H_k, or L_k while a transaction was open); E without one."""
    start, before_pickup = finding.first_log_start, start_floor(finding=finding, rules=rules)
    definite_end = start if before_pickup is None else before_pickup
    possible_end = max(definite_end, first_commit)
    missed_definite = max(0, definite_end - start)
    missed_possible = possible_end - definite_end
    assumed = source == "assumed"
    if before_pickup is None:
        because += "; no poll saw the partition before the group picked it up" + (
            "" if assumed else ": nothing is definitely missed")
    if missed_definite + missed_possible == 0:
        return _Verdict(COVERED, source, f"{because}; the group started at the log start: nothing missed")
    missed = (f"{missed_definite} definitely missed [{start}, {definite_end}), "
              f"{missed_possible} possibly missed [{definite_end}, {possible_end}) (the first {rules.position} "
              f"{first_commit} bounds the start)"
              f"{_open_transaction_words(finding=finding, rules=rules, floor=before_pickup)}")
    likely = likely_within(likely=finding.likely_start, definite_end=definite_end, first_commit=first_commit)
    if likely is not None and missed_possible:
        missed += f"; {_likely_words(finding, likely)}"
    if assumed:
        return _Verdict(
            GAP, source,
            f"{because}: {NOT_DEFINITE}; {possible_end - start} possibly missed [{start}, {possible_end}); "
            f"if the group starts at latest, as assumed: {missed}{_first_sight_words(finding)}",
            missed_possible=possible_end - start, missed_end=possible_end,
            if_latest=(missed_definite, missed_possible),
        )
    return _Verdict(
        GAP, source, f"{because}: {missed}{_first_sight_words(finding)}",
        missed_definite=missed_definite, missed_possible=missed_possible, missed_end=possible_end,
    )


def _duration_verdict(*, finding: FindingState, first_commit: int, rules: GroupRules) -> _Verdict:
    """A start from record timestamps (``by_duration``): it may lie anywhere from
    the log start up, so nothing is definitely missed and [E, C_f) possibly."""
    start = finding.first_log_start
    end = max(start, first_commit)
    because = f"{rules.setting}: the start comes from record timestamps, so nothing is definitely missed"
    if end == start:
        return _Verdict(COVERED, "declared", f"{because}; the group started at the log start: nothing missed")
    return _Verdict(
        GAP, "declared", f"{because}; {end - start} possibly missed [{start}, {end}) (the first "
        f"{rules.position} {first_commit} bounds the start)",
        missed_possible=end - start, missed_end=end,
    )


def _policy_verdict(*, finding: FindingState, first_commit: int, rules: GroupRules) -> _Verdict:
    """Commits cannot tell latest from a quick earliest: a declaration (or the
    cluster's setting) decides, else latest is assumed."""
    if rules.policy == "earliest":
        source, said = _earliest_source(rules)
        return _Verdict(COVERED, source, f"{said}; first {rules.position} {first_commit} cannot tell otherwise")
    if rules.policy == "by_duration":
        return _duration_verdict(finding=finding, first_commit=first_commit, rules=rules)
    source, because = _latest_source(rules)
    return _gap_verdict(finding=finding, first_commit=first_commit, source=source, because=because, rules=rules)


def _decide(
    *, finding: FindingState, seen: _Observation, rules: GroupRules, unowned_after_polls: int
) -> _Verdict:
    """The rule that applies, strongest evidence first: guard, first commit below
    H_k, policy. A start from timestamps (by_duration) may lie below H_k without
    being at the log start: a first commit there is no evidence of being covered."""
    if finding.guard_start_offset is not None:
        return _guard_verdict(finding=finding, guard_start=finding.guard_start_offset)
    if finding.first_commit is None:
        return _undecided_verdict(
            finding=finding, seen=seen, rules=rules, unowned_after_polls=unowned_after_polls
        )
    floor = start_floor(finding=finding, rules=rules)
    evidenced = None if rules.policy == "by_duration" else _evidence_verdict(
        first_commit=finding.first_commit, floor=floor, position=rules.position,
        stable=floor != finding.pre_pickup_high_watermark,
    )
    return evidenced or _policy_verdict(finding=finding, first_commit=finding.first_commit, rules=rules)


def _protected_verdict(*, finding: FindingState, protection: Protection) -> _Verdict:
    """A won protection: the group starts at Gapwatch's commit, exactly."""
    start, offset = finding.first_log_start, protection.offset
    said = f"protected: {protection.words}" if protection.words else "protected by Gapwatch's commit"
    if offset <= start:
        return _Verdict(COVERED, "protected", f"{said}; nothing missed")
    return _Verdict(GAP, "protected", f"{said}, above the first log start {start}: [{start}, {offset}) missed",
                    missed_definite=offset - start, missed_end=offset)


def _expired_count(*, first_log_start: int, missed_end: int, log_start: int) -> int:
    """Missed offsets in [first_log_start, missed_end) that retention already deleted."""
    return max(0, min(log_start, missed_end) - first_log_start)


def _backfill_range(*, first_log_start: int, missed_end: int, log_start: int) -> tuple[int | None, int | None]:
    """[max(E, first_log_start), missed_end): the missed offsets still stored; (None, None) if none are."""
    start = max(log_start, first_log_start)
    return (start, missed_end) if start < missed_end else (None, None)


def partition_lag(*, high_watermark: int, log_start: int | None, committed: int | None) -> int:
    """The one lag rule: stored messages the group will still read. It reads next
    from its commit, or from the log start when retention passed the commit (or
    it has none; a partition without a commit is never "lag 0"); never below 0.
    ``log_start`` None (not read this poll): the commit alone."""
    if committed is None:
        return max(0, high_watermark - (log_start or 0))
    return max(0, high_watermark - (committed if log_start is None else max(committed, log_start)))


def _account_finding(
    *, finding: FindingState, seen: _Observation, rules: GroupRules, unowned_after_polls: int,
    likely_start: LikelyStart | None = None, protection: Protection | None = None,
) -> FindingAccounting:
    """Fold one poll into ``finding``, decide it, and trim its missed range by retention."""
    if protection is not None and not protection.won and seen.committed == protection.offset:
        # Gapwatch's own commit, not the group's: its first commit is still to come.
        seen = replace(seen, committed=None)
    finding = _record_evidence(finding=finding, seen=seen)
    if likely_start is not None and finding.likely_start is None and finding.pickup_before is not None:
        finding = replace(finding, likely_start=likely_start.offset, likely_start_evidence=likely_start.evidence)
    if protection is not None and protection.won:
        verdict = _protected_verdict(finding=finding, protection=protection)
    else:
        verdict = _decide(finding=finding, seen=seen, rules=rules, unowned_after_polls=unowned_after_polls)
    state, explanation, expired, backfill = verdict.state, verdict.explanation, 0, (None, None)
    if verdict.missed_end is not None:
        bounds = dict(
            first_log_start=finding.first_log_start, missed_end=verdict.missed_end, log_start=seen.log_start
        )
        expired, backfill = _expired_count(**bounds), _backfill_range(**bounds)
        if expired:
            state, explanation = EXPIRED, f"{explanation}; {expired} already deleted by retention"
    owner = seen.owner
    return FindingAccounting(
        key=finding.key, created_at=finding.created_at, first_log_start=finding.first_log_start,
        log_start_offset=seen.log_start, high_watermark=seen.high_watermark, committed_offset=seen.committed,
        lag=partition_lag(high_watermark=seen.high_watermark, log_start=seen.log_start, committed=seen.committed),
        owner_member_id=owner.member_id if owner else None,
        owner_client_id=owner.client_id if owner else None,
        owner_host=owner.host if owner else None,
        pre_pickup_high_watermark=finding.pre_pickup_high_watermark, first_commit=finding.first_commit,
        pre_pickup_stable_offset=finding.pre_pickup_stable_offset,
        polls_without_owner=finding.polls_without_owner, guard_start_offset=finding.guard_start_offset,
        missed_definite=verdict.missed_definite, missed_possible=verdict.missed_possible, expired=expired,
        missed_definite_if_latest=verdict.if_latest[0] if verdict.if_latest else None,
        missed_possible_if_latest=verdict.if_latest[1] if verdict.if_latest else None,
        backfill_start=backfill[0], backfill_end=backfill[1],
        policy_source=verdict.policy_source, state=state, explanation=explanation,
        pickup_after=finding.pickup_after, pickup_before=finding.pickup_before,
        likely_start=likely_within(
            likely=finding.likely_start, first_commit=finding.first_commit,
            definite_end=finding.first_log_start + (verdict.if_latest or (verdict.missed_definite,))[0],
        ),
        likely_start_evidence=finding.likely_start_evidence, first_sight=finding.first_sight,
    )


def policy_evidence_of(*, finding: FindingState, rules: GroupRules) -> PolicyEvidence | None:
    """What this finding's observations prove of its group's policy, or None.
    A start from timestamps (by_duration) proves neither; a guard report is
    exact; a first commit below the start floor shows a start below where a
    latest member starts (the floor was above the log start: there was data
    to skip)."""
    key = finding.key
    where = f"{key.topic}[{key.partition}] (generation {key.generation})"
    start, floor = finding.first_log_start, start_floor(finding=finding, rules=rules)
    if rules.policy == "by_duration":
        return None
    if finding.guard_start_offset is not None:
        guard = finding.guard_start_offset
        if guard <= start and floor is not None and floor > start:
            return PolicyEvidence(key.group_id, "earliest", f"the guard reported a start on {where} at the log "
                                  f"start {guard} while the end was {floor}")
        if floor is not None and floor > start and guard >= floor:
            return PolicyEvidence(key.group_id, "latest", f"the guard reported a start on {where} at {guard}, at "
                                  f"or above the end {floor} before the pickup")
        return None
    if finding.first_commit is not None and floor is not None and start <= finding.first_commit < floor:
        return PolicyEvidence(key.group_id, "earliest", f"its first {rules.position} on {where} was "
                              f"{finding.first_commit}, below the end {floor} before it took the partition: it "
                              "did not start at latest")
    return None


def first_start_evidence(
    *, snapshot: Snapshot, known_topics: Mapping[str, KnownTopic], known_groups: Mapping[str, KnownGroup],
) -> dict[str, PolicyEvidence]:
    """A group's first start on a topic, seen against the topic's floors
    (``KnownTopic.floors``): per group, the first (by topic and partition)
    commit below the floor a complete poll read before the group existed.

    The group was not listed by that poll (it is new, or first listed after
    it), and that poll read the floors before it listed the groups: so the
    group took every partition after the floors were read, and a member
    starting at latest starts at or above its partition's floor (the last
    stable offset, where a read_committed member starts; a read_uncommitted
    one starts at the high watermark, above it) and commits at or above its
    start. A commit below the floor proves the group did not start at latest.

    Only a group with a member holding a partition of the topic counts (its
    own application's commits, not a tool's offsets for a group with no
    member, nor a client that assigns partitions itself and seeks), on the
    topic's lineage of the floors (the same topic id). Share groups state
    their start rule; they are skipped. A commit at or above the floor
    proves nothing: an ``earliest`` group that caught up commits there too."""
    found: dict[str, PolicyEvidence] = {}
    topics = {topic.name: topic for topic in snapshot.topics}
    for group in sorted(snapshot.groups, key=lambda g: g.group_id):
        known = known_groups.get(group.group_id)
        if group.type == "share" or (known is not None and known.evidenced_policy == "earliest"):
            continue
        for (name, partition), commit in sorted(group.committed.items()):
            stored, topic = known_topics.get(name), topics.get(name)
            floor = stored.floors.get(partition) if stored is not None else None
            if (floor is None or topic is None or stored.topic_id != topic.topic_id or stored.floors_at is None
                    or (known is not None and known.first_seen_at is not None
                        and known.first_seen_at <= stored.floors_at)
                    or not any(group.owner_of(name, p.partition) for p in topic.partitions)):
                continue
            if commit < floor:
                found[group.group_id] = PolicyEvidence(
                    group.group_id, "earliest",
                    f"its first commits on {name} (a topic it started reading after "
                    f"{stored.floors_at:%Y-%m-%d %H:%M:%S %Z}) include {commit} on partition "
                    f"{partition}, below {floor}, where a group starting at latest would have started: "
                    "it did not start at latest")
                break
    return found


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
        last_stable=partition.last_stable_offset,
        committed=group.committed.get((key.topic, key.partition)),
        owner=group.owner_of(key.topic, key.partition),
        assignee=group.assignee_of(key.topic, key.partition),
        groups_from=snapshot.groups_from or snapshot.taken_at,
        observed_until=snapshot.observed_until or snapshot.taken_at,
        complete=snapshot.complete,
    )


def read_before_change(*, group: GroupSnapshot, generation: NewGeneration) -> bool:
    """What the broker shows of a group no earlier poll saw reading the topic:
    it read the topic before ``generation`` added partitions if it has a commit
    on an old partition, or a member owns an old partition while none owns an
    added one (its clients still work from the old partition count)."""
    old = generation.partition_ids - generation.added_partitions
    if any((generation.topic, p) in group.committed for p in old):
        return True
    owns = {p for p in generation.partition_ids if group.owner_of(generation.topic, p) is not None}
    return bool(owns & old) and not owns & generation.added_partitions


def _new_findings(
    *, snapshot: Snapshot, generations: Iterable[NewGeneration], known_groups: Iterable[KnownGroup], now: datetime
) -> list[FindingState]:
    """One finding per added partition and per listed group that read the topic
    before this snapshot: consumed it at an earlier poll, or, seen reading it
    for the first time, shows it read it before the change (``read_before_change``)."""
    consumed = {group.group_id: group.consumed_topics for group in known_groups}
    internal = {topic.name for topic in snapshot.topics if topic.is_internal}
    log_starts = {(t.name, p.partition): p.log_start for t in snapshot.topics for p in t.partitions}
    return [
        FindingState(
            key=FindingKey(group.group_id, generation.topic, partition, generation.generation),
            created_at=now, first_log_start=log_starts[(generation.topic, partition)],
            pre_pickup_high_watermark=None, first_commit=None, polls_without_owner=0, state=PENDING,
        )
        for generation in generations
        if not generation.is_new_lineage and generation.topic not in internal
        for group in sorted(snapshot.groups, key=lambda g: g.group_id)
        if generation.topic in consumed.get(group.group_id, frozenset())
        or read_before_change(group=group, generation=generation)
        for partition in sorted(generation.added_partitions)
    ]


def _first_sight_findings(
    *, snapshot: Snapshot, generations: Iterable[NewGeneration], first_seen: frozenset[str], now: datetime
) -> list[FindingState]:
    """Topics seen for the first time (no stored generation) by a cluster
    already watched, that groups read already: no generation before this one
    was observed, so an added partition cannot be told from an old one by
    its number. What the broker still shows of one: a live group (a member
    holds partitions of the topic) that neither holds nor has committed on a
    partition holding records: its clients do not know the partition yet,
    as with one added after their last metadata refresh. One finding for
    each, pending, observed from then on like any other. Not one: a
    partition with a commit (a group that read the topic from its creation
    commits above the log start too: seen on every scripted topic of the
    demo), or held without a commit (a member that has read nothing there
    yet), or any partition of a group with no member. So a topic raised and
    picked up between two observations is not told apart: the watcher's tick
    (it stores a new topic within a second) keeps that window short."""
    internal = {topic.name for topic in snapshot.topics if topic.is_internal}
    by_name = {t.name: t for t in snapshot.topics}
    found = []
    for generation in generations:
        if generation.topic not in first_seen or generation.topic in internal:
            continue
        topic = by_name[generation.topic]
        for group in sorted(snapshot.groups, key=lambda g: g.group_id):
            if not any(group.owner_of(topic.name, p.partition) for p in topic.partitions):
                continue
            for offsets in topic.partitions:
                unknown_to_it = ((topic.name, offsets.partition) not in group.committed
                                 and group.owner_of(topic.name, offsets.partition) is None)
                # (A log start not read: no finding can say where its range starts.)
                if not unknown_to_it or offsets.log_start is None or offsets.high_watermark <= offsets.log_start:
                    continue
                found.append(FindingState(
                    key=FindingKey(group.group_id, topic.name, offsets.partition, generation.generation),
                    created_at=now, first_log_start=offsets.log_start, pre_pickup_high_watermark=None,
                    first_commit=None, polls_without_owner=0, state=PENDING, first_sight=True,
                ))
    return found


def _declared_rules(*, group: GroupSnapshot | None, known: KnownGroup | None,
                    evidence: PolicyEvidence | None = None) -> GroupRules:
    if known is None and evidence is None:
        return group_rules(group=group, declared_policy="unknown")
    known = known or KnownGroup(group_id=evidence.group_id, consumed_topics=frozenset())
    evidenced, words = (evidence.policy, evidence.words) if evidence else (known.evidenced_policy,
                                                                           known.policy_evidence)
    return group_rules(group=group, declared_policy=known.declared_policy, declared_isolation=known.declared_isolation,
                       evidenced_policy=evidenced, evidence=words)


def evaluate_snapshot(
    *,
    snapshot: Snapshot,
    known_topics: Iterable[KnownTopic],
    known_groups: Iterable[KnownGroup],
    open_findings: Iterable[FindingState],
    now: datetime,
    unowned_after_polls: int = DEFAULT_UNOWNED_AFTER_POLLS,
    likely_starts: Mapping[FindingKey, LikelyStart] | None = None,
    watching: bool = True,
    protections: Mapping[tuple[str, str, int], Protection] | None = None,
) -> Changes:
    """Everything one snapshot changes (complete, or targeted at ``snapshot.scope``).
    ``watching``: an earlier poll of the cluster succeeded, so a topic seen
    for the first time is a new topic (``_first_sight_findings``), not one
    this first poll simply had not met yet. ``protections``: Gapwatch's
    commits as a member, by (group id, topic, partition) of the topic's
    current lineage.

    1. Diff every topic against its known generation; known topics missing
       from the snapshot (within its scope) are deleted (a partial answer
       never reaches the core).
    2. Close open findings on topics deleted or recreated in this poll.
    3. Open findings, created at ``now``, on the added partitions, for groups
       that read the topic before (``_new_findings``), and on first-seen
       topics that groups read already (``_first_sight_findings``).
    4. Account every open finding, new and existing, whose group, topic and
       partition are in the snapshot.
    5. What the accounting proves of a group's policy that the store does not
       say yet (``policy_evidence_of``): that group's findings are accounted
       again under it; so are the findings of a group whose first start on
       a topic proves it (``first_start_evidence``). Then each finding's state
       transition is listed.
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
    first_seen = frozenset(g.topic for g in generations if watching and g.topic not in known_by_name)
    created = [
        f for f in [*_new_findings(snapshot=snapshot, generations=generations, known_groups=known_groups, now=now),
                    *_first_sight_findings(snapshot=snapshot, generations=generations, first_seen=first_seen, now=now)]
        if f.key not in known_keys
    ]
    findings.update((f.key, f) for f in created)

    offsets = {(t.name, p.partition): p for t in snapshot.topics for p in t.partitions}
    listed_groups = {group.group_id: group for group in snapshot.groups}
    declared = {group.group_id: group for group in known_groups}
    created_keys = {f.key for f in created}
    seen_findings = {
        key: (finding, seen) for key, finding in findings.items()
        if (seen := _observe(key=key, offsets=offsets, groups=listed_groups, snapshot=snapshot)) is not None
    }

    def account(key: FindingKey, evidence: PolicyEvidence | None = None) -> FindingAccounting:
        finding, seen = seen_findings[key]
        return _account_finding(
            finding=finding, seen=seen,
            rules=_declared_rules(group=listed_groups.get(key.group_id), known=declared.get(key.group_id),
                                  evidence=evidence),
            unowned_after_polls=unowned_after_polls, likely_start=(likely_starts or {}).get(key),
            protection=protections.get((key.group_id, key.topic, key.partition)),
        )

    protections = protections or {}
    results = {key: account(key) for key in seen_findings}
    # A won protection's commit is Gapwatch's: it proves nothing of the group's policy.
    unprotected = {key: result for key, result in results.items()
                   if not getattr(protections.get((key.group_id, key.topic, key.partition)), "won", False)}
    evidence = {
        **first_start_evidence(snapshot=snapshot, known_topics=known_by_name, known_groups=declared),
        **_new_evidence(results=unprotected, declared=declared, listed_groups=listed_groups),
    }
    results.update((key, account(key, evidence[key.group_id])) for key in results if key.group_id in evidence)
    accounting, transitions = list(results.values()), []
    for key, result in results.items():
        old_state = None if key in created_keys else findings[key].state
        if old_state != result.state:
            transitions.append(StateTransition(key, old_state, result.state))

    return Changes(
        new_generations=generations,
        deleted_topics=deleted,
        new_findings=tuple(f.key for f in created),
        accounting=tuple(accounting),
        closed_findings=closed,
        groups_to_watch=frozenset(a.key.group_id for a in accounting if a.state == UNDECIDED),
        transitions=tuple(transitions),
        expired_findings=tuple(a.key for a in accounting if a.state == EXPIRED and a.backfill_start is None),
        policy_evidence=tuple(evidence[group_id] for group_id in sorted(evidence)),
    )


def _new_evidence(
    *, results: Mapping[FindingKey, FindingAccounting], declared: Mapping[str, KnownGroup],
    listed_groups: Mapping[str, GroupSnapshot],
) -> dict[str, PolicyEvidence]:
    """Per group, the first (by key) policy its findings prove that the store
    does not hold yet. Proven from each finding's observations under the
    group's stated rules, never under a policy it was assumed or evidenced to have."""
    found: dict[str, PolicyEvidence] = {}
    for key in sorted(results):
        known = declared.get(key.group_id)
        if key.group_id in found:
            continue
        rules = group_rules(group=listed_groups.get(key.group_id),
                            declared_policy=known.declared_policy if known else "unknown",
                            declared_isolation=known.declared_isolation if known else "unknown")
        proof = policy_evidence_of(finding=results[key].as_state(), rules=rules)
        if proof is not None and (known is None or known.evidenced_policy != proof.policy):
            found[key.group_id] = proof
    return found
