"""The plan of a guarded expansion (issue 33, item 1; DESIGN.md section 7):
for a topic and a new partition count, what adding the partitions will do to
each group that reads the topic, before anything changes.

Pure: stored facts in (``TopicFacts``, ``ReaderFacts``, the broker's
``BrokerVerdict``), an ``ExpansionPlan`` out. Per group, one outcome:

- ``covered``: the group starts a new partition at its log start by itself
  (earliest declared or proven by a finding, a guarded group, a streams group
  or a Connect sink by their frameworks' default, a share group on a release
  that starts added partitions at 0);
- ``protected_before``: Gapwatch makes it start there before its first record
  lands (``protection``): a live consumer group by membership (Gapwatch joins
  it with a member of its own that takes none of its partitions, adds them,
  commits each new one at its log start and leaves: ``groups.domain.
  membership``); a share group by ``share.auto.offset.reset=earliest`` on
  the group first; an empty consumer group with commits by an administrative
  commit right after the partitions exist;
- ``repaired_after``: a group Gapwatch cannot sit in (a streams group, an
  assignor its member cannot offer): a backfill of the sound range, approved
  with the plan;
- ``at_risk``: nothing can protect or repair it (its sink cannot take the
  backfill), with why.

The records a group is expected to miss are an **estimate**, named so: the
topic's produce rate (high-watermark deltas between two polls, so offsets
per second, transaction markers included) divided over the new count, times
the added partitions, times the group's expected pickup delay, as a range.
Nothing here is a bound; the bounds come after the expansion, from the
broker (DESIGN.md section 3).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from groups.domain.group_kinds import (
    CLASSIC,
    CONSUMER,
    EARLIEST_BY_DEFAULT,
    SHARE,
    STREAMS,
    group_kind,
)
from groups.domain.kafka_features import SHARE_RESET, kafka_release, release_at_least, share_reset
from groups.domain.membership import DEFAULT_ANCHOR_TOPIC, seat_cost, seat_needs, seat_problem
from groups.domain.planning import PlanError
from groups.domain.sinks import backfill_sink_for

Outcome = Literal["covered", "protected_before", "repaired_after", "at_risk"]
PolicySource = Literal["declared", "evidenced", "guard", "cluster", "assumed"]
# How a protected group is protected (``GroupPlan.protection``), "" for the other outcomes.
Protection = Literal["", "membership", "commit", "share_config"]
PROTECTION_LABELS = {
    "membership": "by membership (join, add, commit, leave)",
    "commit": "by an administrative commit (the group is empty)",
    "share_config": "by the share group's config",
}

OUTCOME_LABELS = {
    "covered": "covered",
    "protected_before": "protected before",
    "repaired_after": "repaired after",
    "at_risk": "at risk",
}
POLICY_SOURCE_LABELS = {
    "declared": "declared by an operator",
    "evidenced": "proven by evidence",
    "guard": "Gapwatch's guard in its members",
    "cluster": "the cluster's group config",
    "assumed": "assumed",
}
# The most partitions a topic may be asked to have (Kafka's partition ids are 32-bit).
MAX_PARTITIONS = 2**31 - 1
# The first release whose share groups start a partition added to a topic they
# already read at offset 0 under the default share.auto.offset.reset (KAFKA-20742).
SHARE_STARTS_ADDED_AT_ZERO = (4, 4)

# Seconds from the partitions' creation until a member of the group starts
# reading them, (low, high), and why. An estimate: the broker knows neither.
PICKUP_DELAY_SECONDS = {
    # KIP-848: the coordinator assigns the partition at once, the member gets
    # it at its next heartbeat (group.consumer.heartbeat.interval.ms, 5 s by
    # default) and starts about a second later; 7.1 s measured on Kafka 4.3.
    CONSUMER: (1, 10),
    # Classic: the members see the partition at their own metadata refresh
    # (metadata.max.age.ms, topic.metadata.refresh.interval.ms: 300 s by
    # default), which the broker cannot tell; then the group rebalances.
    CLASSIC: (1, 300),
}
PICKUP_DELAY_WORDS = {
    CONSUMER: "a KIP-848 group gets new partitions at a member's next heartbeat (5 s by default) and starts "
              "about a second later: 1 to 10 s",
    CLASSIC: "a classic group's members see new partitions at their own metadata refresh, unknown to the "
             "broker (300 s by default in the Java client and librdkafka): 1 to 300 s",
}


# --- Inputs -----------------------------------------------------------------


@dataclass(frozen=True)
class ProduceRate:
    """The topic's summed high watermark at two polls: ``offsets`` offsets were
    appended in ``seconds`` seconds (None when not measured)."""

    offsets: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.offsets / self.seconds


def produce_rate(*, previous_end: int | None, previous_at: float | None, end: int | None,
                 at: float | None) -> ProduceRate | None:
    """The rate between two polls' summed high watermarks (times in seconds);
    None without two polls, with no time between them, or when the sum went
    down (the topic was recreated, or retention deleted it: no rate)."""
    if previous_end is None or previous_at is None or end is None or at is None:
        return None
    seconds = at - previous_at
    if seconds <= 0 or end < previous_end:
        return None
    return ProduceRate(offsets=end - previous_end, seconds=seconds)


@dataclass(frozen=True)
class TopicFacts:
    name: str
    partitions: int
    rate: ProduceRate | None


@dataclass(frozen=True)
class ReaderFacts:
    """One group that reads the topic, as the last poll stored it.

    ``type``: the broker's word ("classic", "consumer", "share", "streams", ""
    until described). ``declared_policy``: "unknown", "latest" or "earliest".
    ``reset_setting``: a share group's ``share.auto.offset.reset`` in the
    poll's words. ``commits_on_topic``: the group has a position on some
    partition of the topic. ``evidence``: words of a finding that proved the
    group started a new partition below latest ("" none). ``guard``: words of
    a guard report from its members ("" none). ``sink_problem``: why its
    backfill sink cannot take a repair ("" it can). ``internal_topics``: a
    streams group's repartition and changelog topics (named after its
    application id), which make it a stateful application."""

    group_id: str
    type: str
    state: str
    members: int
    declared_policy: str = "unknown"
    reset_setting: str = ""
    commits_on_topic: bool = False
    evidence: str = ""
    guard: str = ""
    sink: str = "parquet"
    sink_problem: str = ""
    internal_topics: tuple[str, ...] = ()
    # A classic group's agreed assignor (its protocol name), as DescribeGroups says.
    assignor: str = ""


@dataclass(frozen=True)
class BrokerVerdict:
    """The broker's answer to CreatePartitions with validate_only: ``accepted``,
    or refused with ``reason`` (the error's name and message, a missing ACL
    named so). ``asked``: False when nobody could ask (the reason says why)."""

    accepted: bool
    reason: str = ""
    asked: bool = True


# --- Output -----------------------------------------------------------------


@dataclass(frozen=True)
class MissEstimate:
    """Offsets the group is expected to miss on the new partitions, as a range
    ``[low, high]`` (None: not estimable, ``words`` say why). An estimate."""

    low: int | None
    high: int | None
    words: str


@dataclass(frozen=True)
class GroupPlan:
    group_id: str
    kind: str
    protocol: str
    state: str
    members: int
    policy: str
    policy_source: PolicySource
    policy_words: str
    outcome: Outcome
    reason: str
    expected_missed: MissEstimate
    sink: str = ""
    protection: Protection = ""
    # For a protection by membership: what it costs the group's members, the ACLs it needs, and the
    # alternative the operator may choose instead (a repair after), in words.
    cost: str = ""
    needs: str = ""
    alternative: str = ""

    @property
    def outcome_label(self) -> str:
        return OUTCOME_LABELS[self.outcome]

    @property
    def policy_source_label(self) -> str:
        return POLICY_SOURCE_LABELS[self.policy_source]


@dataclass(frozen=True)
class ExpansionPlan:
    topic: str
    current_partitions: int
    new_partitions: int
    added_partitions: tuple[int, ...]
    rate: ProduceRate | None
    groups: tuple[GroupPlan, ...]
    verdict: BrokerVerdict

    @property
    def at_risk(self) -> tuple[GroupPlan, ...]:
        return tuple(g for g in self.groups if g.outcome == "at_risk")

    def counts(self) -> dict[str, int]:
        """How many groups get each outcome, every outcome listed."""
        return {outcome: sum(1 for g in self.groups if g.outcome == outcome) for outcome in OUTCOME_LABELS}


# --- Rules ------------------------------------------------------------------


def partitions_problem(*, current: int, requested: object) -> str:
    """Why ``requested`` is no new partition count for a topic of ``current``
    partitions ("" when it is one): a whole number above ``current`` and at
    most MAX_PARTITIONS. Kafka never removes partitions."""
    if isinstance(requested, bool) or not isinstance(requested, int):
        return f"partitions must be a whole number, got {requested!r}"
    if requested > MAX_PARTITIONS:
        return f"partitions must be at most {MAX_PARTITIONS}, got {requested}"
    if requested <= current:
        return (f"partitions must be higher than the topic's {current} partitions (as of the last poll): "
                f"Kafka only adds partitions, got {requested}")
    return ""


def sink_problem(*, sink: str, replay_topic: str, topic: str, existing_topics: Collection[str]) -> str:
    """Why the group's backfill sink cannot take a repair of ``topic`` ("" when it can)."""
    try:
        backfill_sink_for(sink=sink, replay_topic="", handler="", default_sink="",
                          configured_replay_topic=replay_topic, handlers=(), sources=(topic,),
                          existing_topics=existing_topics)
    except PlanError as error:
        return str(error)
    return ""


@dataclass(frozen=True)
class _Policy:
    policy: str
    source: PolicySource
    words: str


def _policy(reader: ReaderFacts, kind: str) -> _Policy:
    """Where the group's start rule comes from, strongest first: the guard,
    the cluster's own config (share groups), a declaration, evidence, a
    framework's default, else the clients' default (latest, assumed)."""
    if reader.guard:
        return _Policy("earliest", "guard", reader.guard)
    if kind == SHARE:
        value, default = share_reset(reader.reset_setting)
        origin = "the broker's default" if default else "set on the group"
        policy = "by_duration" if value.startswith("by_duration") else value
        return _Policy(policy, "cluster", f"{SHARE_RESET}={value} ({origin})")
    if reader.declared_policy in ("earliest", "latest"):
        return _Policy(reader.declared_policy, "declared", f"declared {reader.declared_policy} by an operator")
    if reader.evidence:
        return _Policy("earliest", "evidenced", reader.evidence)
    default = EARLIEST_BY_DEFAULT.get(kind)
    if default is not None:
        return _Policy("earliest", "assumed", f"assumed earliest, {default}")
    return _Policy("latest", "assumed",
                   "assumed latest: the default of the Java client, librdkafka and sarama (declare the group's "
                   "policy to change it)")


def _outcome(reader: ReaderFacts, kind: str, policy: _Policy, metadata_version: str) -> tuple[Outcome, str]:
    if policy.source == "guard":
        return "covered", "its members run Gapwatch's guard, which seeks a partition it never knew to its start"
    if kind == SHARE:
        return _share_outcome(policy, metadata_version)
    if policy.policy == "earliest":
        return "covered", f"it starts a new partition at its log start ({POLICY_SOURCE_LABELS[policy.source]})"
    if reader.members == 0 and reader.commits_on_topic and kind != STREAMS:
        return "protected_before", ("no members and commits on the topic: Gapwatch commits the new partitions at "
                                    "their log start right after they exist, before any member returns")
    seat = ("Gapwatch does not commit a streams group's offsets" if kind == STREAMS
            else seat_problem(protocol=reader.type, assignor=reader.assignor))
    if reader.members > 0 and not seat:
        return "protected_before", (
            "a live group: Gapwatch joins it with a member of its own that takes none of its partitions, adds the "
            "partitions, commits each new one at its log start and leaves; its members then start there (a "
            "committed offset wins over auto.offset.reset), whatever their policy")
    if reader.sink_problem:
        return "at_risk", (f"a latest group nothing on the broker can start earlier, and its backfill sink "
                           f"({reader.sink}) cannot take the repair: {reader.sink_problem}")
    why = seat or "its members choose where they start, and the broker lets no outsider change it"
    return "repaired_after", (f"a latest group: {why}; a backfill of the sound range (log start to its first "
                              f"commit) to {reader.sink}, approved with this plan, runs once its first commit "
                              f"on each new partition is seen")


def _stateful_streams(internal_topics: tuple[str, ...], new_count: int) -> str:
    """A stateful Streams application stops when its input grows: the coordinator (KIP-1071) finds its
    internal topics incorrectly partitioned and Streams throws a TopologyException; it reads again (new
    partitions at earliest) once they have as many partitions and it is restarted. Gapwatch does neither:
    re-keying an application's state is its owner's decision."""
    names = ", ".join(internal_topics[:3]) + (f" and {len(internal_topics) - 3} more" if len(internal_topics) > 3
                                              else "")
    return (f"; but this stateful application stops until its internal topics ({names}) have {new_count} "
            "partitions too and it is restarted (Kafka: INCORRECTLY_PARTITIONED_TOPICS); Gapwatch does not change "
            "them")


def _share_outcome(policy: _Policy, metadata_version: str) -> tuple[Outcome, str]:
    if policy.policy == "earliest":
        return "covered", f"{SHARE_RESET}=earliest on the group: it starts new partitions at their log start"
    default = policy.words.endswith("(the broker's default)")
    if policy.policy == "latest" and default and release_at_least(metadata_version, SHARE_STARTS_ADDED_AT_ZERO):
        return "covered", (f"Kafka {kafka_release(metadata_version)} starts a share group left at the default on "
                           "a partition added to a topic it already reads at offset 0 (KAFKA-20742)")
    return "protected_before", (f"Gapwatch sets {SHARE_RESET}=earliest on the group before the partitions are "
                                "added, and restores its previous value once every new partition is initialised")


def _pickup_kind(protocol: str) -> str:
    """Whose pickup delay applies: KIP-848's for consumer, share and streams
    groups (assigned by their coordinator), classic's for the others (an
    undescribed group included: the longer wait, not the shorter)."""
    return CONSUMER if protocol in (CONSUMER, SHARE, STREAMS) else CLASSIC


def _expected_missed(outcome: Outcome, *, pickup: str, rate: ProduceRate | None, added: int,
                     new_count: int, seated: bool = False) -> MissEstimate:
    if seated:
        unprotected = _expected_missed("repaired_after", pickup=pickup, rate=rate, added=added, new_count=new_count)
        if unprotected.high is None:
            return MissEstimate(0, None, "none if the protection wins (it commits within milliseconds of the add); "
                                         f"should it lose the race, {unprotected.words}")
        return MissEstimate(0, unprotected.high, (
            "none if the protection wins (it commits within milliseconds of the add); should it lose the race "
            f"and the group start at latest, up to {unprotected.high}: {unprotected.words}"))
    if outcome in ("covered", "protected_before"):
        return MissEstimate(0, 0, "none: it starts the new partitions at their log start")
    if rate is None:
        return MissEstimate(None, None, "not estimated: no produce rate measured yet (two polls of the topic "
                                        "are needed)")
    low_seconds, high_seconds = PICKUP_DELAY_SECONDS[pickup]
    share = rate.per_second * added / new_count
    low, high = math.floor(share * low_seconds), math.ceil(share * high_seconds)
    then = "the backfill replays them" if outcome == "repaired_after" else "lost unless repaired by hand"
    return MissEstimate(low, high, (
        f"estimate: {rate.per_second:.3g} offsets/s over {new_count} partitions, {added} of them new, for "
        f"{PICKUP_DELAY_WORDS[pickup]}; {then}"))


def _protection(reader: ReaderFacts, kind: str, outcome: Outcome) -> Protection:
    if outcome != "protected_before":
        return ""
    if kind == SHARE:
        return "share_config"
    return "membership" if reader.members > 0 else "commit"


def plan_group(reader: ReaderFacts, *, rate: ProduceRate | None, added: int, new_count: int,
               metadata_version: str, topic: str = "", anchor_topic: str = DEFAULT_ANCHOR_TOPIC) -> GroupPlan:
    kind = group_kind(reader.type, reader.group_id)
    policy = _policy(reader, kind)
    outcome, reason = _outcome(reader, kind, policy, metadata_version)
    if kind == STREAMS and reader.internal_topics:
        reason += _stateful_streams(reader.internal_topics, new_count)
    protection = _protection(reader, kind, outcome)
    seated = protection == "membership"
    return GroupPlan(
        group_id=reader.group_id, kind=kind, protocol=reader.type or "unknown", state=reader.state,
        members=reader.members, policy=policy.policy, policy_source=policy.source, policy_words=policy.words,
        outcome=outcome, reason=reason,
        expected_missed=_expected_missed(outcome, pickup=_pickup_kind(reader.type), rate=rate,
                                         added=added, new_count=new_count, seated=seated),
        sink=reader.sink if outcome in ("repaired_after", "at_risk") or seated else "",
        protection=protection,
        cost=seat_cost(protocol=reader.type, assignor=reader.assignor, members=reader.members) if seated else "",
        needs=seat_needs(group_id=reader.group_id, topic=topic, anchor_topic=anchor_topic) if seated else "",
        alternative=(f"repair after: a backfill of the sound range to {reader.sink}, should the protection fail or "
                     "be declined" + (f" (its sink cannot take it: {reader.sink_problem})" if reader.sink_problem
                                      else "")) if seated else "",
    )


def plan_expansion(*, topic: TopicFacts, readers: Sequence[ReaderFacts], new_partitions: int,
                   verdict: BrokerVerdict, metadata_version: str,
                   anchor_topic: str = DEFAULT_ANCHOR_TOPIC) -> ExpansionPlan:
    """The plan of raising ``topic`` to ``new_partitions`` (above its count:
    ``partitions_problem`` first). Groups sorted by id; ``metadata_version``:
    the cluster's, "" when unknown."""
    added = tuple(range(topic.partitions, new_partitions))
    groups = tuple(
        plan_group(reader, rate=topic.rate, added=len(added), new_count=new_partitions,
                   metadata_version=metadata_version, topic=topic.name, anchor_topic=anchor_topic)
        for reader in sorted(readers, key=lambda r: r.group_id)
    )
    return ExpansionPlan(topic=topic.name, current_partitions=topic.partitions, new_partitions=new_partitions,
                         added_partitions=added, rate=topic.rate, groups=groups, verdict=verdict)

