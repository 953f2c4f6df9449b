"""The plan of a guarded expansion (groups/domain/expansion/plan.py), table-driven:
each case says why its answer is right.

The world: topic ``orders`` with 4 partitions, raised to 8 (4 added), produced
to at 80 offsets/s (8,000 offsets in 100 s between two polls), so 40 offsets/s
land on the new partitions once producers see them.
"""

from __future__ import annotations

import pytest

from groups.domain.expansion.plan import (
    BrokerVerdict,
    MissEstimate,
    ProduceRate,
    ReaderFacts,
    TopicFacts,
    partitions_problem,
    plan_expansion,
    plan_group,
    produce_rate,
    release_at_least,
    share_reset,
    sink_problem,
)
from groups.domain.membership import is_protector, protector_client_id

RATE = ProduceRate(offsets=8_000, seconds=100.0)
ORDERS = TopicFacts("orders", 4, RATE)
ACCEPTED = BrokerVerdict(accepted=True)
KAFKA_44 = "4.4-IV0"
KAFKA_43 = "4.3-IV0"
SHARE_DEFAULT = "share.auto.offset.reset=latest (the broker's default)"
SHARE_LATEST_SET = "share.auto.offset.reset=latest (set on the group)"
SHARE_EARLIEST = "share.auto.offset.reset=earliest (set on the group)"
SHARE_DURATION = "share.auto.offset.reset=by_duration:PT1H (set on the group)"


def reader(group_id="billing", type="consumer", state="Stable", members=2, **facts) -> ReaderFacts:
    return ReaderFacts(group_id=group_id, type=type, state=state, members=members, **facts)


# (reader, cluster's metadata.version, outcome, policy, policy source, expected missed (low, high), why)
GROUP_CASES = [
    pytest.param(
        reader(), KAFKA_44, "protected_before", "latest", "assumed", (0, 400),
        "a live KIP-848 group nobody declared: latest is every client's default, so assumed; Gapwatch sits in it "
        "and commits the new partitions' log start before its members take them: nothing if that wins, and if it "
        "loses the race, 40 offsets/s on the new partitions for its 1 to 10 s pickup",
        id="live-consumer-group-assumed-latest",
    ),
    pytest.param(
        reader(type="classic", assignor="range"), KAFKA_44, "protected_before", "latest", "assumed", (0, 12_000),
        "a live classic group with an assignor Gapwatch's member offers: protected by membership; lost, it would "
        "see new partitions only at its clients' metadata refresh, up to 300 s by default: 40 offsets/s for 1 to "
        "300 s",
        id="live-classic-group-assumed-latest",
    ),
    pytest.param(
        reader(type="classic", declared_policy="latest"), KAFKA_44, "protected_before", "latest", "declared",
        (0, 12_000),
        "declared latest: the declaration, not an assumption, gives the policy; the outcome is the same",
        id="live-classic-group-declared-latest",
    ),
    pytest.param(
        reader(declared_policy="earliest"), KAFKA_44, "covered", "earliest", "declared", (0, 0),
        "declared earliest: its members start the new partitions at their log start, nothing to miss",
        id="declared-earliest",
    ),
    pytest.param(
        reader(evidence="a commit below the high watermark before pickup on orders [3]"), KAFKA_44, "covered",
        "earliest", "evidenced", (0, 0),
        "an earlier finding proved it started below latest (a latest consumer cannot commit below H_k)",
        id="proven-earliest-by-evidence",
    ),
    pytest.param(
        reader(declared_policy="latest", evidence="a commit below H_k"), KAFKA_44, "protected_before", "latest",
        "declared", (0, 400),
        "an operator's declaration outranks old evidence: the clients may have been reconfigured since",
        id="declaration-outranks-evidence",
    ),
    pytest.param(
        reader(declared_policy="latest", guard="its guard reported a start offset on orders [3]"), KAFKA_44,
        "covered", "earliest", "guard", (0, 0),
        "a guarded group seeks a partition it never knew to its beginning, whatever auto.offset.reset says",
        id="guarded-group",
    ),
    pytest.param(
        reader(state="Empty", members=0, commits_on_topic=True), KAFKA_44, "protected_before", "latest", "assumed",
        (0, 0),
        "no members and commits on the topic: the broker accepts an admin commit of the new partitions at their "
        "log start, made before any member returns, so it misses nothing",
        id="empty-group-with-commits",
    ),
    pytest.param(
        reader(state="Empty", members=0, commits_on_topic=True, declared_policy="earliest"), KAFKA_44, "covered",
        "earliest", "declared", (0, 0),
        "empty, but declared earliest: it starts at the log start by itself, nothing to commit",
        id="empty-group-declared-earliest",
    ),
    pytest.param(
        reader(members=3, sink="kafka", sink_problem="orders.replay already exists and is not a replay topic"),
        KAFKA_44, "protected_before", "latest", "assumed", (0, 400),
        "live and latest, its sink cannot take a backfill: the protection by membership needs no sink",
        id="live-latest-no-sink-allowed",
    ),
    pytest.param(
        reader(type="classic", assignor="sticky", sink="kafka", sink_problem="no replay topic"),
        KAFKA_44, "at_risk", "latest", "assumed", (40, 12_000),
        "an assignor Gapwatch's member cannot offer (Java's eager 'sticky') and a sink that cannot take a "
        "backfill: nothing can protect or repair it",
        id="unseatable-and-no-sink",
    ),
    pytest.param(
        reader(type="classic", assignor="sticky"), KAFKA_44, "repaired_after", "latest", "assumed", (40, 12_000),
        "the group's members agreed on 'sticky', which librdkafka cannot offer: a seat would be refused "
        "(INCONSISTENT_GROUP_PROTOCOL), so it is repaired after",
        id="unseatable-assignor",
    ),
    pytest.param(
        reader(type="classic", assignor="cooperative-sticky"), KAFKA_44, "protected_before", "latest", "assumed",
        (0, 12_000), "a cooperative group: Gapwatch's member offers cooperative-sticky too",
        id="cooperative-group",
    ),
    pytest.param(
        reader(state="Empty", members=0, commits_on_topic=True, sink="kafka", sink_problem="refused"), KAFKA_44,
        "protected_before", "latest", "assumed", (0, 0),
        "a refused sink does not matter to an empty group: the commit before its return protects it",
        id="empty-group-needs-no-sink",
    ),
    pytest.param(
        reader("connect-s3-sink", type="classic"), KAFKA_44, "covered", "earliest", "assumed", (0, 0),
        "a Kafka Connect sink's group starts at earliest by Connect's default",
        id="connect-sink-default",
    ),
    pytest.param(
        reader("connect-s3-sink", type="consumer", declared_policy="latest"), KAFKA_44, "protected_before",
        "latest", "declared", (0, 400),
        "a Connect sink declared latest (consumer.override.auto.offset.reset) is a live latest group like any",
        id="connect-sink-declared-latest",
    ),
    pytest.param(
        reader("connect-s3-sink", type="classic", declared_policy="latest", state="Empty", members=0,
               commits_on_topic=True), KAFKA_44, "protected_before", "latest", "declared", (0, 0),
        "a Connect sink's group is a consumer group: empty with commits, it is protected by the commit",
        id="connect-sink-declared-latest-empty",
    ),
    pytest.param(
        reader("wordcount", type="streams"), KAFKA_44, "covered", "earliest", "assumed", (0, 0),
        "a streams group starts new source partitions at earliest by Kafka Streams' default",
        id="streams-group-default",
    ),
    pytest.param(
        reader("wordcount", type="streams", declared_policy="latest"), KAFKA_44, "repaired_after", "latest",
        "declared", (40, 400),
        "a streams group declared latest: Gapwatch commits no streams offsets, the backfill repairs it; its "
        "coordinator assigns like KIP-848's: 1 to 10 s",
        id="streams-group-declared-latest",
    ),
    pytest.param(
        reader("wordcount", type="streams", declared_policy="latest", state="Empty", members=0,
               commits_on_topic=True), KAFKA_44, "repaired_after", "latest", "declared", (40, 400),
        "an empty streams group is not protected by a consumer-group commit: repaired after",
        id="streams-group-declared-latest-empty",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_DEFAULT), KAFKA_44, "covered", "latest", "cluster", (0, 0),
        "Kafka 4.4.0 starts a share group left at the default on an added partition at offset 0 (KAFKA-20742)",
        id="share-group-default-on-4.4",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_DEFAULT), "5.0-IV1", "covered", "latest", "cluster", (0, 0),
        "a later release keeps KAFKA-20742's behaviour: releases compare as numbers",
        id="share-group-default-on-5.0",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_DEFAULT), KAFKA_43, "protected_before", "latest",
        "cluster", (0, 0),
        "on 4.3 a share group at the default starts an added partition at its end: set earliest on the group first",
        id="share-group-default-on-4.3",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_DEFAULT), "", "protected_before", "latest", "cluster",
        (0, 0),
        "the release is unknown: setting earliest before is harmless, trusting a fix that may be absent is not",
        id="share-group-default-release-unknown",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_LATEST_SET), KAFKA_44, "protected_before", "latest",
        "cluster", (0, 0),
        "latest set on the group explicitly: KAFKA-20742 is only observed for the default, so protect it",
        id="share-group-latest-set-on-4.4",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_EARLIEST), KAFKA_43, "covered", "earliest", "cluster",
        (0, 0),
        "the cluster states earliest for the group: covered on any release",
        id="share-group-earliest",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_DURATION), KAFKA_44, "protected_before", "by_duration",
        "cluster", (0, 0),
        "by_duration starts from record timestamps (producer clocks): earliest for the expansion is exact",
        id="share-group-by-duration",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting="", members=0, state="Empty"), KAFKA_43, "protected_before",
        "latest", "cluster", (0, 0),
        "no config read yet: the broker's default (latest) applies, protected like it",
        id="share-group-setting-not-read",
    ),
    pytest.param(
        reader("jobs", type="share", reset_setting=SHARE_LATEST_SET, declared_policy="earliest"), KAFKA_43,
        "protected_before", "latest", "cluster", (0, 0),
        "a share group's policy is the cluster's config, not a declaration",
        id="share-group-ignores-declaration",
    ),
    pytest.param(
        reader("new", type="", state="", members=1), KAFKA_44, "repaired_after", "latest", "assumed", (40, 12_000),
        "not yet described: assumed latest, and the longer (classic) pickup, not the shorter",
        id="undescribed-group",
    ),
]


@pytest.mark.parametrize(("facts", "metadata_version", "outcome", "policy", "source", "missed", "why"), GROUP_CASES)
def test_group_plans(facts, metadata_version, outcome, policy, source, missed, why):
    plan = plan_group(facts, rate=RATE, added=4, new_count=8, metadata_version=metadata_version)
    assert (plan.outcome, plan.policy, plan.policy_source) == (outcome, policy, source), why
    assert (plan.expected_missed.low, plan.expected_missed.high) == missed, why
    assert plan.reason, "every outcome has its reason in words"


# (rate, added, new count, protocol, (low, high), why)
MISS_CASES = [
    pytest.param(None, 4, 8, "consumer", (None, None), "no rate measured: no estimate, never a made-up 0",
                 id="no-rate"),
    pytest.param(ProduceRate(300, 10.0), 1, 3, "consumer", (10, 100),
                 "30 offsets/s over 3 partitions: 10/s on the one new one, for 1 to 10 s", id="one-of-three"),
    pytest.param(ProduceRate(10, 3.0), 1, 3, "consumer", (1, 12),
                 "3.33 offsets/s over 3: 1.11/s on the new one; the low end rounds down (1.11 -> 1), the high "
                 "end up (11.1 -> 12): the range never narrows by rounding", id="rounding-widens"),
    pytest.param(ProduceRate(0, 60.0), 4, 8, "classic", (0, 0), "an idle topic: nothing to miss", id="idle-topic"),
    pytest.param(ProduceRate(8_000, 100.0), 4, 8, "share", (0, 0),
                 "a share group is protected or covered: nothing is expected missed", id="share-not-exposed"),
]


@pytest.mark.parametrize(("rate", "added", "new_count", "protocol", "missed", "why"), MISS_CASES)
def test_expected_missed(rate, added, new_count, protocol, missed, why):
    facts = reader(type=protocol, members=0, reset_setting=SHARE_LATEST_SET)
    plan = plan_group(facts, rate=rate, added=added, new_count=new_count, metadata_version=KAFKA_43)
    assert (plan.expected_missed.low, plan.expected_missed.high) == missed, why


def test_the_estimate_says_it_is_one_with_its_evidence():
    plan = plan_group(reader(type="classic", assignor="sticky"), rate=RATE, added=4, new_count=8,
                      metadata_version=KAFKA_44)
    assert plan.expected_missed == MissEstimate(40, 12_000, (
        "estimate: 80 offsets/s over 8 partitions, 4 of them new, for a classic group's members see new "
        "partitions at their own metadata refresh, unknown to the broker (300 s by default in the Java client "
        "and librdkafka): 1 to 300 s; the backfill replays them"))
    risky = plan_group(reader(members=0, sink_problem="no"), rate=RATE, added=4, new_count=8, metadata_version=KAFKA_44)
    assert risky.expected_missed.words.endswith("lost unless repaired by hand")
    assert "not estimated" in plan_group(reader(members=0), rate=None, added=4, new_count=8,
                                         metadata_version=KAFKA_44).expected_missed.words


def test_reasons_name_what_gapwatch_will_do():
    def reason(facts, version=KAFKA_44):
        return plan_group(facts, rate=RATE, added=4, new_count=8, metadata_version=version).reason

    assert "backfill of the sound range" in reason(reader(type="classic", assignor="sticky", sink="kafka"))
    assert "to kafka" in reason(reader(type="classic", assignor="sticky", sink="kafka"))
    assert "cannot offer" in reason(reader(type="classic", assignor="sticky", sink="kafka"))
    assert "joins it with a member of its own" in reason(reader(type="classic"))
    assert "commits the new partitions at their log start" in reason(reader(members=0, commits_on_topic=True))
    assert "sets share.auto.offset.reset=earliest" in reason(reader("j", type="share"), KAFKA_43)
    assert "KAFKA-20742" in reason(reader("j", type="share", reset_setting=SHARE_DEFAULT))
    assert "Kafka 4.4 starts" in reason(reader("j", type="share", reset_setting=SHARE_DEFAULT))
    assert "guard" in reason(reader(guard="g"))
    assert "refused here" in reason(reader(members=0, sink_problem="refused here"))
    assert "streams" in reason(reader("w", type="streams", declared_policy="latest"))
    # A stateful Streams application: covered, but Kafka stops it until its internal topics match.
    stateful = reader("w", type="streams", internal_topics=("w-store-changelog", "w-store-repartition"))
    assert reason(stateful).startswith("it starts a new partition at its log start")
    assert "stops until its internal topics (w-store-changelog, w-store-repartition) have 8 partitions" \
        in reason(stateful)
    assert "internal topics" not in reason(reader("w", type="streams"))
    assert "internal topics" not in reason(reader(internal_topics=("billing-x-changelog",)))
    assert "declared by an operator" in reason(reader(declared_policy="earliest"))
    assert "proven by evidence" in reason(reader(evidence="e"))


def test_policy_words_say_where_the_policy_comes_from():
    def words(facts):
        return plan_group(facts, rate=RATE, added=4, new_count=8, metadata_version=KAFKA_44).policy_words

    assert words(reader()).startswith("assumed latest")
    assert words(reader(declared_policy="latest")) == "declared latest by an operator"
    assert words(reader(evidence="a commit below H_k")) == "a commit below H_k"
    assert words(reader(guard="guard report")) == "guard report"
    assert words(reader("j", type="share", reset_setting=SHARE_DEFAULT)) == SHARE_DEFAULT
    assert words(reader("j", type="share", reset_setting=SHARE_DURATION)) == SHARE_DURATION
    assert words(reader("w", type="streams")).startswith("assumed earliest, Kafka Streams' default")


def test_only_groups_a_backfill_repairs_name_their_sink():
    def sink(facts):
        return plan_group(facts, rate=RATE, added=4, new_count=8, metadata_version=KAFKA_44).sink

    assert sink(reader(sink="kafka")) == "kafka"
    assert sink(reader(sink="kafka", sink_problem="x")) == "kafka"
    assert sink(reader(sink="kafka", declared_policy="earliest")) == ""
    assert sink(reader(sink="kafka", members=0, commits_on_topic=True)) == ""
    assert sink(reader(sink="kafka", type="classic", assignor="sticky")) == "kafka", "repaired after, no seat"
    assert sink(reader(sink="kafka", members=0, sink_problem="x")) == "kafka", "at risk: the sink that cannot take it"


def test_a_plan_lists_every_group_sorted_with_the_added_partitions_and_counts():
    readers = [reader("zeta"), reader("alpha", declared_policy="earliest"), reader("<script>", members=0,
                                                                                    commits_on_topic=True),
               reader("mid", sink_problem="no sink"), reader("jobs", type="share", reset_setting=SHARE_DEFAULT)]
    plan = plan_expansion(topic=ORDERS, readers=readers, new_partitions=6, verdict=ACCEPTED,
                          metadata_version=KAFKA_44)
    assert [g.group_id for g in plan.groups] == ["<script>", "alpha", "jobs", "mid", "zeta"]
    assert plan.added_partitions == (4, 5) and (plan.current_partitions, plan.new_partitions) == (4, 6)
    assert plan.counts() == {"covered": 2, "protected_before": 3, "repaired_after": 0, "at_risk": 0}
    assert plan.groups[2].outcome == "covered", "the cluster's release reaches each group's plan (KAFKA-20742)"
    assert [g.protection for g in plan.groups] == ["commit", "", "", "membership", "membership"]
    assert plan.at_risk == ()
    assert plan.verdict is ACCEPTED and plan.rate is RATE and plan.topic == "orders"
    # Should the protection lose the race: 80/s over 6 partitions, 2 new: 26.7/s, for 1 to 10 s.
    assert (plan.groups[3].expected_missed.low, plan.groups[3].expected_missed.high) == (0, 267)
    assert plan_expansion(topic=ORDERS, readers=readers, new_partitions=6, verdict=ACCEPTED,
                          metadata_version=KAFKA_43).groups[2].outcome == "protected_before"
    assert plan.groups[0].group_id == "<script>" and plan.groups[0].protocol == "consumer"
    # The seat's needs name the plan's topic and the anchor topic it was given.
    anchored = plan_expansion(topic=ORDERS, readers=[reader()], new_partitions=6, verdict=ACCEPTED,
                              metadata_version=KAFKA_44, anchor_topic="gw-anchor")
    assert anchored.groups[0].needs == ("Read on group 'billing' (to join and commit), Read on topic 'orders' (to "
                                        "commit on it), Read on Gapwatch's anchor topic 'gw-anchor' (and Create on "
                                        "it unless it exists)")


def test_an_undescribed_group_reports_its_protocol_as_unknown():
    plan = plan_group(reader(type=""), rate=None, added=1, new_count=2, metadata_version="")
    assert (plan.protocol, plan.kind, plan.state, plan.members) == ("unknown", "unknown", "Stable", 2)


# (current, requested, problem fragment or "", why)
PARTITION_CASES = [
    pytest.param(4, 5, "", "one more than now: a valid new count", id="one-more"),
    pytest.param(4, 4, "higher than the topic's 4 partitions", "the same count adds nothing", id="same"),
    pytest.param(4, 3, "Kafka only adds partitions", "Kafka never removes partitions", id="fewer"),
    pytest.param(4, "8", "whole number, got '8'", "text is not a count, even of digits", id="text"),
    pytest.param(4, True, "whole number, got True", "a boolean is an int in Python, not a count", id="bool"),
    pytest.param(4, 8.0, "whole number, got 8.0", "a float is not a count", id="float"),
    pytest.param(4, None, "whole number, got None", "missing", id="none"),
    pytest.param(4, 2**31 - 1, "", "the largest count a 32-bit partition id allows", id="max"),
    pytest.param(4, 2**31, "at most 2147483647", "above a 32-bit partition id", id="above-max"),
]


@pytest.mark.parametrize(("current", "requested", "problem", "why"), PARTITION_CASES)
def test_partitions_problem(current, requested, problem, why):
    found = partitions_problem(current=current, requested=requested)
    assert (problem in found and bool(found) == bool(problem)), why


# (previous end, previous at, end, at, offsets/s or None, why)
RATE_CASES = [
    pytest.param(100, 10.0, 400, 70.0, 5.0, "300 offsets in 60 s", id="steady"),
    pytest.param(None, None, 400, 70.0, None, "one poll only: no rate yet", id="one-poll"),
    pytest.param(100, 10.0, None, None, None, "no current sum", id="no-current"),
    pytest.param(100, None, 400, 70.0, None, "no previous time", id="no-previous-time"),
    pytest.param(100, 10.0, 400, None, None, "no current time", id="no-current-time"),
    pytest.param(100, 70.0, 400, 70.0, None, "two sums at one instant: no time passed, no rate", id="same-instant"),
    pytest.param(100, 80.0, 400, 70.0, None, "time went backwards: no rate", id="backwards"),
    pytest.param(400, 10.0, 100, 70.0, None, "the sum went down (topic recreated): no rate", id="sum-down"),
    pytest.param(400, 10.0, 400, 70.0, 0.0, "nothing produced: a rate of 0, measured", id="idle"),
    pytest.param(100, 10.0, 110, 10.5, 20.0, "samples half a second apart still give a rate", id="sub-second"),
]


@pytest.mark.parametrize(("previous_end", "previous_at", "end", "at", "per_second", "why"), RATE_CASES)
def test_produce_rate(previous_end, previous_at, end, at, per_second, why):
    rate = produce_rate(previous_end=previous_end, previous_at=previous_at, end=end, at=at)
    assert (None if rate is None else rate.per_second) == per_second, why


# (metadata.version, release, answer, why)
RELEASE_CASES = [
    pytest.param("4.4-IV0", (4, 4), True, "4.4 is 4.4", id="same"),
    pytest.param("4.3-IV3", (4, 4), False, "4.3 is older", id="older-minor"),
    pytest.param("3.9-IV0", (4, 4), False, "3.9 is older, though 9 > 4", id="older-major"),
    pytest.param("4.10-IV0", (4, 4), True, "4.10 is newer: numbers, not text", id="two-digit-minor"),
    pytest.param("5.0-IV0", (4, 4), True, "5.0 is newer", id="newer-major"),
    pytest.param("", (4, 4), None, "no release known", id="unknown"),
    pytest.param("4", (4, 4), None, "no minor: unreadable", id="no-minor"),
    pytest.param("x.y-IV0", (4, 4), None, "not numbers", id="not-numbers"),
    pytest.param("4.y-IV0", (4, 4), None, "minor not a number", id="minor-not-number"),
    pytest.param("4.4.x-IV0", (4, 4), True, "only the first two parts name the release", id="three-parts"),
]


@pytest.mark.parametrize(("metadata_version", "release", "answer", "why"), RELEASE_CASES)
def test_release_at_least(metadata_version, release, answer, why):
    assert release_at_least(metadata_version, release) is answer, why


@pytest.mark.parametrize(("setting", "answer", "why"), [
    pytest.param(SHARE_DEFAULT, ("latest", True), "the broker's default", id="default"),
    pytest.param(SHARE_LATEST_SET, ("latest", False), "set on the group", id="set"),
    pytest.param(SHARE_DURATION, ("by_duration:PT1H", False), "a duration keeps its value", id="duration"),
    pytest.param("", ("latest", True), "nothing read: the broker's default", id="nothing"),
    pytest.param("auto.offset.reset=earliest", ("latest", True), "not a share setting", id="other-setting"),
])
def test_share_reset(setting, answer, why):
    assert share_reset(setting) == answer, why


def test_sink_problem_names_a_replay_topic_that_is_no_replay_topic():
    assert sink_problem(sink="parquet", replay_topic="", topic="orders", existing_topics={"orders"}) == ""
    assert sink_problem(sink="kafka", replay_topic="", topic="orders", existing_topics={"orders"}) == ""
    assert sink_problem(sink="kafka", replay_topic="orders", topic="orders", existing_topics={"orders"}) == \
        "The replay topic must not be the topic the records come from."
    assert sink_problem(sink="kafka", replay_topic="payments", topic="orders",
                        existing_topics={"orders", "payments"}) == "", "the group's own configured replay topic"
    assert sink_problem(sink="handler", replay_topic="", topic="orders", existing_topics=set()).startswith(
        "Choose a handler listed in BACKFILL_HANDLERS"), "a group's sink is never a handler: none is allowed"
    assert "internal topic" in sink_problem(sink="kafka", replay_topic="__consumer_offsets", topic="orders",
                                            existing_topics=set())


def test_labels_name_the_outcome_and_the_policy_source():
    plan = plan_group(reader(members=0, commits_on_topic=True), rate=RATE, added=4, new_count=8,
                      metadata_version=KAFKA_44)
    assert (plan.outcome_label, plan.policy_source_label) == ("protected before", "assumed")
    plan = plan_group(reader("j", type="share"), rate=RATE, added=4, new_count=8, metadata_version=KAFKA_43)
    assert plan.policy_source_label == "the cluster's group config"


# The exact words per kind of answer: what the page, the API and the command show.
REASON_CASES = [
    pytest.param(reader(members=0), KAFKA_44,
                 "a latest group: its members choose where they start, and the broker lets no outsider change it; a "
                 "backfill of the sound range (log start to its first commit) to parquet, approved with this plan, "
                 "runs once its first commit on each new partition is seen",
                 id="empty-without-commits"),
    pytest.param(reader(type=""), KAFKA_44,
                 "a latest group: a not yet described group has no consumer membership Gapwatch can take; a backfill "
                 "of the sound range (log start to its first commit) to parquet, approved with this plan, runs once "
                 "its first commit on each new partition is seen", id="undescribed"),
    pytest.param(reader(guard="g"), KAFKA_44,
                 "its members run Gapwatch's guard, which seeks a partition it never knew to its start", id="guard"),
    pytest.param(reader(declared_policy="earliest"), KAFKA_44,
                 "it starts a new partition at its log start (declared by an operator)", id="declared-earliest"),
    pytest.param(reader(members=0, commits_on_topic=True), KAFKA_44,
                 "no members and commits on the topic: Gapwatch commits the new partitions at their log start right "
                 "after they exist, before any member returns", id="empty"),
    pytest.param(reader(members=0, sink="kafka", sink_problem="no replay topic"), KAFKA_44,
                 "a latest group nothing on the broker can start earlier, and its backfill sink (kafka) cannot take "
                 "the repair: no replay topic", id="at-risk"),
    pytest.param(reader(type="classic", assignor="sticky"), KAFKA_44,
                 "a latest group: its members agreed on the assignor 'sticky', which Gapwatch's member (librdkafka: "
                 "range, roundrobin, cooperative-sticky) cannot offer; a backfill of the sound range (log start to "
                 "its first commit) to parquet, approved with this plan, runs once its first commit on each new "
                 "partition is seen", id="unseatable"),
    pytest.param(reader(), KAFKA_44,
                 "a live group: Gapwatch joins it with a member of its own that takes none of its partitions, adds "
                 "the partitions, commits each new one at its log start and leaves; its members then start there (a "
                 "committed offset wins over auto.offset.reset), whatever their policy", id="live"),
    pytest.param(reader("w", type="streams", declared_policy="latest"), KAFKA_44,
                 "a latest group: Gapwatch does not commit a streams group's offsets; a backfill of the sound range "
                 "(log start to its first commit) to parquet, approved with this plan, runs once its first commit "
                 "on each new partition is seen", id="streams-latest"),
    pytest.param(reader("j", type="share", reset_setting=SHARE_EARLIEST), KAFKA_43,
                 "share.auto.offset.reset=earliest on the group: it starts new partitions at their log start",
                 id="share-earliest"),
    pytest.param(reader("j", type="share", reset_setting=SHARE_DEFAULT), KAFKA_44,
                 "Kafka 4.4 starts a share group left at the default on a partition added to a topic it already "
                 "reads at offset 0 (KAFKA-20742)", id="share-4.4"),
    pytest.param(reader("j", type="share", reset_setting=SHARE_DEFAULT), KAFKA_43,
                 "Gapwatch sets share.auto.offset.reset=earliest on the group before the partitions are added, and "
                 "restores its previous value once every new partition is initialised", id="share-4.3"),
    pytest.param(reader("w", type="streams", internal_topics=("w-a-changelog", "w-b-changelog", "w-c-changelog")),
                 KAFKA_44,
                 "it starts a new partition at its log start (assumed); but this stateful application stops until its "
                 "internal topics (w-a-changelog, w-b-changelog, w-c-changelog) have 8 partitions too and it is "
                 "restarted (Kafka: INCORRECTLY_PARTITIONED_TOPICS); Gapwatch does not change them",
                 id="stateful-streams-three-internal-topics"),
    pytest.param(reader("w", type="streams", internal_topics=("w-a-changelog", "w-b-changelog", "w-c-changelog",
                                                               "w-d-repartition")), KAFKA_44,
                 "it starts a new partition at its log start (assumed); but this stateful application stops until its "
                 "internal topics (w-a-changelog, w-b-changelog, w-c-changelog and 1 more) have 8 partitions too and "
                 "it is restarted (Kafka: INCORRECTLY_PARTITIONED_TOPICS); Gapwatch does not change them",
                 id="stateful-streams-more-than-three-named-by-count"),
]


@pytest.mark.parametrize(("facts", "metadata_version", "reason"), REASON_CASES)
def test_reasons_in_words(facts, metadata_version, reason):
    assert plan_group(facts, rate=RATE, added=4, new_count=8, metadata_version=metadata_version).reason == reason


def test_the_words_of_an_estimate_not_made_and_of_nothing_to_miss():
    covered = plan_group(reader(declared_policy="earliest"), rate=RATE, added=4, new_count=8,
                         metadata_version=KAFKA_44)
    assert covered.expected_missed.words == "none: it starts the new partitions at their log start"
    unmeasured = plan_group(reader(members=0), rate=None, added=4, new_count=8, metadata_version=KAFKA_44)
    assert unmeasured.expected_missed.words == \
        "not estimated: no produce rate measured yet (two polls of the topic are needed)"
    assumed = plan_group(reader(), rate=RATE, added=4, new_count=8, metadata_version=KAFKA_44)
    assert assumed.policy_words == ("assumed latest: the default of the Java client, librdkafka and sarama (declare "
                                    "the group's policy to change it)")


# (reader, protection, cost (the whole of it, or a fragment where a case says so), why)
SEAT_CASES = [
    pytest.param(reader(members=3), "membership",
                 "no rebalance: a KIP-848 group takes Gapwatch's member in at its next heartbeat (up to 5 s by "
                 "default) and moves none of its 3 members' partitions",
                 "KIP-848: the coordinator takes the member in at a heartbeat and moves nobody's partitions",
                 id="kip-848"),
    pytest.param(reader(type="classic", assignor="range", members=3), "membership",
                 "two rebalances (Gapwatch joining, then leaving) with the eager assignor 'range': each time its 3 "
                 "members give up their partitions and pause until the slowest rejoins (at most its "
                 "max.poll.interval.ms)",
                 "an eager classic group revokes everything at the join and at the leave", id="eager"),
    pytest.param(reader(type="classic", assignor="", members=1), "membership", "eager assignor 'range'",
                 "an assignor not described yet is taken for librdkafka's and Java's first default", id="no-assignor"),
    pytest.param(reader(type="classic", assignor="cooperative-sticky", members=2), "membership",
                 "two rebalances (Gapwatch joining, then leaving) with the cooperative assignor 'cooperative-sticky': "
                 "its 2 members keep their partitions and keep reading",
                 "a cooperative group rebalances without revoking", id="cooperative"),
    pytest.param(reader(members=0, commits_on_topic=True), "commit", "",
                 "an empty group needs no seat: the administrative commit", id="empty"),
    pytest.param(reader("j", type="share", reset_setting=SHARE_LATEST_SET), "share_config", "",
                 "a share group: its config", id="share"),
]


@pytest.mark.parametrize(("facts", "protection", "cost", "why"), SEAT_CASES)
def test_each_protection_says_how_and_what_it_costs(facts, protection, cost, why):
    plan = plan_group(facts, rate=RATE, added=4, new_count=8, metadata_version=KAFKA_43, topic="orders",
                      anchor_topic="gw-anchor")
    assert plan.protection == protection, why
    if protection == "membership":
        assert cost in plan.cost, why
        if plan.members != 1:  # the whole sentence (one member: a fragment, its grammar is not settled yet)
            assert cost == plan.cost, why
        assert plan.needs == ("Read on group 'billing' (to join and commit), Read on topic 'orders' (to commit on "
                              "it), Read on Gapwatch's anchor topic 'gw-anchor' (and Create on it unless it exists)")
        assert plan.alternative.startswith("repair after: a backfill of the sound range to parquet")
    else:
        assert (plan.cost, plan.needs, plan.alternative) == ("", "", ""), why


def test_gapwatchs_own_seat_is_told_from_the_groups_members_by_its_client_id():
    assert is_protector(protector_client_id(what="expansion-12"))
    assert not is_protector("billing-app"), "a member of the group's own application"


def test_a_seated_group_says_what_it_would_miss_should_the_protection_lose_and_what_repairs_it():
    plan = plan_group(reader(), rate=RATE, added=4, new_count=8, metadata_version=KAFKA_44)
    assert plan.expected_missed == MissEstimate(0, 400, (
        "none if the protection wins (it commits within milliseconds of the add); should it lose the race and the "
        "group start at latest, up to 400: estimate: 80 offsets/s over 8 partitions, 4 of them new, for a KIP-848 "
        "group gets new partitions at a member's next heartbeat (5 s by default) and starts about a second later: "
        "1 to 10 s; the backfill replays them"))
    assert plan.alternative == ("repair after: a backfill of the sound range to parquet, should the protection fail "
                                "or be declined")
    refused = plan_group(reader(sink_problem="no replay topic"), rate=RATE, added=4, new_count=8,
                         metadata_version=KAFKA_44)
    assert refused.alternative == ("repair after: a backfill of the sound range to parquet, should the protection "
                                   "fail or be declined (its sink cannot take it: no replay topic)")


def test_a_protection_without_a_rate_says_what_it_would_miss_is_not_estimated():
    plan = plan_group(reader(), rate=None, added=4, new_count=8, metadata_version=KAFKA_44)
    assert (plan.expected_missed.low, plan.expected_missed.high) == (0, None)
    assert plan.expected_missed.words.startswith("none if the protection wins")
    assert "not estimated" in plan.expected_missed.words
