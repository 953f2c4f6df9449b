"""The rules of an expansion job (groups/domain/expansion/job.py), table-driven:
each case says why its answer is right.

The world: ``orders`` raised from 2 to 4 partitions; new partitions 2 and 3,
whose log starts at 0."""

from __future__ import annotations

import pytest

from groups.domain.expansion.job import (
    STEPS,
    GroupFacts,
    PartitionFacts,
    group_verdict,
    job_final_status,
    next_step,
    plan_fingerprint,
)

NEXT_STEP_CASES = [
    ({}, "validate", "nothing done: the broker is asked again first"),
    ({"validate": {}}, "protect", "protections precede the partitions"),
    ({"validate": {}, "protect": {}}, "add_partitions", "partitions only once every share group is protected"),
    ({s: {} for s in STEPS[:4]}, "watch", "a crash after the commits resumes at the watch"),
    ({"validate": {}, "protect": {}, "add_partitions": {}, "watch": {}}, "commit_empty",
     "the first step not done, even if a later one is recorded"),
    ({s: {} for s in STEPS}, None, "every step done: nothing to run"),
]


@pytest.mark.parametrize("done, expected, why", NEXT_STEP_CASES, ids=[c[2] for c in NEXT_STEP_CASES])
def test_it_continues_at_the_first_step_not_done(done, expected, why):
    assert next_step(done) == expected, why


def _plan(**changes) -> dict:
    plan = {"cluster": "local", "topic": "orders", "current_partitions": 2, "new_partitions": 4,
            "broker_verdict": {"accepted": True, "reason": "ok"},
            "produce_rate": {"offsets_per_second": 40.0},
            "groups": [{"group": "a", "kind": "classic", "outcome": "repaired_after", "sink": "parquet",
                        "members": 1, "expected_missed": {"low": 1, "high": 10}},
                       {"group": "b", "kind": "share", "outcome": "protected_before", "sink": None, "members": 1}]}
    plan.update(changes)
    return plan


FINGERPRINT_CASES = [
    (_plan(produce_rate={"offsets_per_second": 99.0}), True, "the produce rate moves with every poll: not decided"),
    (_plan(groups=list(reversed(_plan()["groups"]))), True, "the groups' order decides nothing"),
    (_plan(new_partitions=5), False, "another count is another plan"),
    (_plan(broker_verdict={"accepted": False, "reason": "no"}), False, "a refusal since is another plan"),
    (_plan(groups=[{**_plan()["groups"][0], "outcome": "at_risk"}, _plan()["groups"][1]]), False,
     "a group's outcome changed"),
    (_plan(groups=[_plan()["groups"][0]]), False, "a group appeared or left"),
    (_plan(groups=[{**_plan()["groups"][0], "sink": "kafka"}, _plan()["groups"][1]]), False,
     "another sink is another repair"),
    (_plan(groups=[{**_plan()["groups"][0], "kind": "consumer"}, _plan()["groups"][1]]), False,
     "a group that moved to another protocol is planned otherwise"),
    (_plan(cluster="other"), False, "the same topic on another cluster is another plan"),
    (_plan(topic="payments"), False, "another topic is another plan"),
    (_plan(current_partitions=3), False, "a partition added since the plan: another plan"),
]

# Two groups of one kind: the order the plan lists them in decides nothing.
SAME_KIND = [{"group": g, "kind": "classic", "outcome": "repaired_after", "sink": "parquet"} for g in ("a", "b")]


@pytest.mark.parametrize("other, same, why", FINGERPRINT_CASES, ids=[c[2] for c in FINGERPRINT_CASES])
def test_it_fingerprints_what_the_plan_decides(other, same, why):
    assert (plan_fingerprint(other) == plan_fingerprint(_plan())) is same, why


def test_the_groups_order_decides_nothing_within_one_kind():
    assert plan_fingerprint(_plan(groups=SAME_KIND)) == plan_fingerprint(_plan(groups=SAME_KIND[::-1]))


# (facts, nothing_lost, unrepaired (partition, start, end, why), the verdict's exact words, why)
VERDICT_CASES = [
    (GroupFacts("early", "covered", (PartitionFacts(2, 0, start=0), PartitionFacts(3, 0, start=0))), True, (),
     "nothing lost (covered: it started every new partition at its log start)",
     "started both new partitions at their log start"),
    (GroupFacts("early", "covered", (PartitionFacts(2, 0), PartitionFacts(3, 0))), True, (),
     "nothing lost (covered: it started every new partition at its log start)",
     "no finding and no start above the log start: nothing says it missed anything"),
    (GroupFacts("share", "protected_before", (PartitionFacts(2, 0, start=0), PartitionFacts(3, 0, start=17))),
     False, ((3, 0, 17, "the group started above the log start"),), "17 offset(s) unrepaired on 1 partition(s)",
     "a share group that started partition 3 at 17 never gets 0..16"),
    (GroupFacts("live", "repaired_after", (PartitionFacts(2, 0, missed=(0, 40), repaired=True),
                                           PartitionFacts(3, 0, missed=(0, 35), repaired=True))), True, (),
     "nothing lost (copied to its sink: the group's own application did not read offsets [0, 40) of partition 2, "
     "[0, 35) of partition 3; a verified backfill wrote them there)",
     "both sound ranges replayed by verified backfills (the sink not recorded: 'its sink')"),
    (GroupFacts("live", "repaired_after", (PartitionFacts(2, 0, missed=(0, 40), repaired=True),
                                           PartitionFacts(3, 0, missed=(0, 35), left="over the maximum")))
     , False, ((3, 0, 35, "over the maximum"),), "35 offset(s) unrepaired on 1 partition(s)",
     "one range left for a person is unrepaired, and exactly that range"),
    (GroupFacts("live", "repaired_after", (PartitionFacts(2, 0, missed=(5, 5)),)), True, (),
     "nothing lost (it missed nothing on the new partitions)", "an empty sound range misses nothing"),
    (GroupFacts("live", "repaired_after", (PartitionFacts(2, 0, missed=(5, 5), repaired=True),)), True, (),
     "nothing lost (it missed nothing on the new partitions)",
     "an empty sound range 'repaired' copied nothing: the verdict does not claim a copy"),
    (GroupFacts("gone", "protected_before", (PartitionFacts(2, 0, start=0),), problem="its config was not restored"),
     True, (), "nothing lost (protected before: it started every new partition at its log start); but its config "
     "was not restored", "nothing lost, and the problem is still said"),
    (GroupFacts("late", "repaired_after", (PartitionFacts(2, 5, missed=(5, 40)), PartitionFacts(3, 5, start=9)),
                problem="the backfill job failed"), False,
     ((2, 5, 40, "no verified backfill covered it"), (3, 5, 9, "the group started above the log start")),
     "39 offset(s) unrepaired on 2 partition(s); the backfill job failed",
     "retention had moved the log start to 5: 35 + 4 offsets from there, each range with its reason, and the "
     "problem after the count"),
]


@pytest.mark.parametrize("facts, nothing_lost, unrepaired, words, why", VERDICT_CASES,
                         ids=[c[4] for c in VERDICT_CASES])
def test_it_gives_each_group_its_verdict(facts, nothing_lost, unrepaired, words, why):
    verdict = group_verdict(facts)
    assert (verdict.group_id, verdict.nothing_lost) == (facts.group_id, nothing_lost), why
    assert tuple((u.partition, u.start, u.end, u.why) for u in verdict.unrepaired) == unrepaired, why
    assert verdict.words == words, why


def test_a_verdict_as_stored_on_the_job():
    verdict = group_verdict(GroupFacts("live", "repaired_after", (
        PartitionFacts(2, 0, missed=(0, 40), repaired=True), PartitionFacts(3, 0, missed=(0, 35), left="no sink"))))
    assert verdict.as_dict() == {
        "nothing_lost": False, "how": "lost", "words": "35 offset(s) unrepaired on 1 partition(s)",
        "unrepaired": [{"partition": 3, "start": 0, "end": 35, "why": "no sink"}],
    }


def test_it_succeeds_only_when_every_group_lost_nothing():
    whole = group_verdict(GroupFacts("a", "covered", (PartitionFacts(2, 0, start=0),)))
    lost = group_verdict(GroupFacts("b", "repaired_after", (PartitionFacts(2, 0, missed=(0, 3)),)))
    assert job_final_status([whole]) == "succeeded"
    assert job_final_status([whole, lost]) == "succeeded_with_loss"
    assert job_final_status([lost, whole]) == "succeeded_with_loss", "one group's loss is the job's, wherever it is"


ASSUMED = "over the maximum; possibly read: the group's policy is only assumed (latest), not known"

# (partitions, the verdict's exact words, each unrepaired range's why, why)
ASSUMED_CASES = [
    pytest.param((PartitionFacts(2, 0, missed=(0, 100), left="over the maximum", assumed=True),),
                 "100 offset(s) possibly unread, unrepaired, on 1 partition(s): its policy is only assumed (latest); "
                 "declared or seen earliest, it read them itself", (ASSUMED,),
                 "a group whose policy is only assumed: its unrepaired range is possibly unread, never called lost "
                 "as a fact (seen: a fast earliest group told '200 offsets unrepaired')", id="all-assumed"),
    pytest.param((PartitionFacts(2, 0, missed=(0, 100), left="over the maximum", assumed=True),
                  PartitionFacts(3, 0, missed=(0, 50), left="over the maximum")),
                 "150 offset(s) unrepaired on 2 partition(s)", (ASSUMED, "over the maximum"),
                 "one partition's range rests on a known policy: the verdict does not soften", id="one-known"),
]


@pytest.mark.parametrize("partitions, words, whys, why", ASSUMED_CASES)
def test_an_assumed_policy_leaves_offsets_possibly_unread_not_lost(partitions, words, whys, why):
    verdict = group_verdict(GroupFacts("quick", "repaired_after", partitions))
    assert not verdict.nothing_lost, "nothing can be claimed whole while a range may be unread"
    assert verdict.words == words, why
    assert tuple(u.why for u in verdict.unrepaired) == whys, why


# (facts, how, words fragment, why): a verdict that rests on a copy says so, distinct from protected.
HOW_CASES = [
    pytest.param(GroupFacts("live", "protected_before", (PartitionFacts(2, 0, start=0), PartitionFacts(3, 0, start=0)),
                            method="membership"), "protected",
                 "Gapwatch committed each new partition's log start as a member of the group before any of its "
                 "members held it, so its own application reads every record",
                 "protected by membership: the group's own application reads every record", id="membership"),
    pytest.param(GroupFacts("left", "protected_before", (PartitionFacts(2, 0, start=0),), method="commit"),
                 "protected", "protected before: it started every new partition at its log start",
                 "an empty group committed administratively", id="commit"),
    pytest.param(GroupFacts("early", "covered", (PartitionFacts(2, 0, start=0),)), "covered",
                 "covered: it started every new partition at its log start", "it did so by itself", id="covered"),
    pytest.param(GroupFacts("copied", "repaired_after", (PartitionFacts(2, 0, missed=(0, 40), repaired=True),
                                                         PartitionFacts(3, 0, missed=(0, 35), repaired=True)),
                            sink="parquet"), "copied",
                 "copied to parquet: the group's own application did not read offsets [0, 40) of partition 2, "
                 "[0, 35) of partition 3; a verified backfill wrote them there",
                 "a backfill is a copy the application never read: said so, with the ranges", id="copied"),
    pytest.param(GroupFacts("maybe", "repaired_after", (PartitionFacts(2, 0, missed=(0, 40), repaired=True,
                                                                        assumed=True),), sink="parquet"), "copied",
                 "copied to parquet: the group's own application may not have read offsets [0, 40) of partition 2",
                 "its policy only assumed: an earliest group read the range itself; never said as a fact",
                 id="copied-possibly"),
    pytest.param(GroupFacts("raced", "repaired_after", (PartitionFacts(2, 0, start=0),
                                                        PartitionFacts(3, 0, missed=(0, 12), repaired=True)),
                            method="", sink="kafka", problem="the protection lost the race on partition(s) [3]"),
                 "copied", "copied to kafka: the group's own application did not read offsets [0, 12) of partition 3",
                 "a protection lost on one partition, repaired there: the copy is said, and why", id="lost-race"),
    pytest.param(GroupFacts("idle", "repaired_after", (PartitionFacts(2, 0, missed=(4, 4)),)), "covered",
                 "it missed nothing on the new partitions",
                 "a group planned for a repair that found nothing to repair: covered, not copied", id="nothing-missed"),
    pytest.param(GroupFacts("live", "protected_before", (PartitionFacts(2, 0, missed=(0, 9)),), method="membership"),
                 "lost", "9 offset(s) unrepaired", "a protected group that missed offsets anyway: lost", id="lost"),
]


@pytest.mark.parametrize(("facts", "how", "words", "why"), HOW_CASES)
def test_each_verdict_says_how_the_group_came_to_lose_nothing(facts, how, words, why):
    verdict = group_verdict(facts)
    assert (verdict.how, verdict.as_dict()["how"]) == (how, how), why
    assert words in verdict.words, (why, verdict.words)
