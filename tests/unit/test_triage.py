"""Table-driven tests of the home page's triage: each case says why its answer
is right.

The default finding: ``orders[2]``, log start 0, high watermark 1000, the
group committed 600; 30 definitely and 10 possibly missed. A reset to
earliest re-delivers the 600 records below the commit: more than ten times
the 40 missed and over 100 more, so the reset preview recommends a backfill.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from groups.domain.triage import GroupInfo, OpenFinding, Recommendation, Totals, group_is_empty, recommend, triage

LIVE = GroupInfo(key=1, cluster="prod", group_id="billing", state="Stable", member_count=2)
EMPTY = GroupInfo(key=2, cluster="prod", group_id="audit", state="Empty", member_count=0)


def finding(id: int = 1, *, group: GroupInfo = LIVE, topic: str = "orders", partition: int = 2, state: str = "gap",
            definite: int = 30, possible: int = 10, committed: int | None = 600, high_watermark: int = 1000,
            active_job: int | None = None) -> OpenFinding:
    return OpenFinding(id=id, group_key=group.key, topic=topic, partition=partition, state=state,
                       missed_definite=definite, missed_possible=possible, log_start=0,
                       high_watermark=high_watermark, committed=committed, active_job=active_job)


@dataclass(frozen=True)
class Case:
    name: str
    why: str
    group: GroupInfo
    findings: tuple[OpenFinding, ...]
    action: str
    finding_ids: tuple[int, ...] = ()
    jobs: tuple[int, ...] = ()
    # The reason shown on the page, word for word: its numbers and its plurals are part of the answer.
    reason: str = ""


ONE_MEMBER = replace(LIVE, member_count=1)

CASES = [
    Case("covered only", "the group started at earliest: there is nothing to repair, so no repair is offered",
         LIVE, (finding(state="covered", definite=0, possible=0),), "none"),
    Case("covered beside a gap", "the covered partition is left out of the repair; the gap is backfilled "
         "(600 re-delivered for 40 missed)", LIVE,
         (finding(1, state="covered", definite=0, possible=0), finding(2, partition=3)), "backfill", (2,)),
    Case("reset re-delivers far more", "600 re-delivered > 10 x 40 missed and 560 > 100 more: the reset "
         "preview's rule says backfill, even for an empty group", EMPTY, (finding(group=EMPTY),), "backfill", (1,)),
    Case("empty group, reset re-delivers little", "committed 45 re-delivers 45 for 40 missed: few duplicates, "
         "and the broker accepts the reset now", EMPTY, (finding(group=EMPTY, committed=45),), "reset", (1,)),
    Case("live group, reset re-delivers little", "a reset would wait until the 2 members stop; a backfill "
         "replays without disturbing them", LIVE, (finding(committed=45),), "backfill", (1,)),
    Case("a Dead group counts as empty", "the broker's Dead state has no member: the reset can run",
         replace(EMPTY, state="Dead", member_count=0), (finding(group=EMPTY, committed=45),), "reset", (1,)),
    Case("nobody took the partition, empty group", "a backfill cannot cover what the group skips when it "
         "takes the partition; a reset to earliest now closes the gap with no duplicates", EMPTY,
         (finding(group=EMPTY, state="pending", definite=0, possible=0, committed=None),), "reset", (1,)),
    Case("nobody took one of two partitions", "the untaken one rules out a backfill for the group: only a "
         "reset covers both", LIVE, (finding(1), finding(2, partition=3, state="unowned", committed=None)),
         "reset", (1, 2)),
    Case("a job works on every repairable one", "recommend nothing new: the job is the repair", LIVE,
         (finding(1, active_job=7), finding(2, partition=3, active_job=7),
          finding(3, partition=4, state="covered", definite=0, possible=0)), "job", (), (7,)),
    Case("a job works on one of two", "the other still needs a repair of its own", LIVE,
         (finding(1, active_job=7), finding(2, partition=3)), "backfill", (2,)),
    Case("undecided, no commit yet", "no commit: a reset re-delivers nothing, and with live members it would "
         "wait; a backfill to the current end does not disturb them", LIVE,
         (finding(state="undecided", possible=0, committed=None),), "backfill", (1,)),
    Case("two jobs on two partitions", "each partition has its own job: both are named, in order, and the "
         "reason speaks of jobs and of them", LIVE, (finding(1, active_job=8), finding(2, partition=3, active_job=7)),
         "job", (), (7, 8), reason="jobs already working on them"),
    Case("one job on one partition", "one job, one finding: a job, working on it", LIVE,
         (finding(active_job=7),), "job", (), (7,), reason="a job already working on it"),
    Case("nobody took two partitions, empty group", "both untaken partitions are counted, and the empty group "
         "accepts the reset now", EMPTY,
         (finding(1, group=EMPTY, state="pending", definite=0, possible=0, committed=None),
          finding(2, group=EMPTY, partition=3, state="unowned", definite=0, possible=0, committed=None)),
         "reset", (1, 2)),
    Case("live group of one member, reset re-delivers little", "one live member, in the singular; the reset "
         "would wait for it to stop", ONE_MEMBER, (finding(committed=45),), "backfill", (1,)),
]

# The reasons of the cases above, word for word (a case without its own ``reason``).
REASONS = {
    "covered only": "covered: the group read the new partition from its start; nothing to repair",
    "covered beside a gap": "a reset would re-deliver 600 offsets to recover at most 40: replay only the missed "
                            "ranges",
    "reset re-delivers far more": "a reset would re-deliver 600 offsets to recover at most 40: replay only the "
                                  "missed ranges",
    "a Dead group counts as empty": "the group is empty: a reset to earliest recovers at most 40 and re-delivers "
                                    "45, no Spark job needed",
    "a job works on one of two": "a reset would re-deliver 600 offsets to recover at most 40: replay only the "
                                 "missed ranges",
    "undecided, no commit yet": "the group has 2 live members: a reset would wait until they stop; a backfill does "
                                "not disturb them",
    "empty group, reset re-delivers little": "the group is empty: a reset to earliest recovers at most 40 and "
                                             "re-delivers 45, no Spark job needed",
    "live group, reset re-delivers little": "the group has 2 live members: a reset would wait until they stop; a "
                                            "backfill does not disturb them",
    "nobody took the partition, empty group": "nobody has taken 1 new partition yet: reset to earliest now, while "
                                              "the group is empty; a backfill cannot cover what the group skips "
                                              "later",
    "nobody took one of two partitions": "nobody has taken 1 new partition yet: reset to earliest (the job waits "
                                         "until the group is empty); a backfill cannot cover what the group skips "
                                         "later",
    "a job works on every repairable one": "a job already working on them",
    "nobody took two partitions, empty group": "nobody has taken 2 new partitions yet: reset to earliest now, "
                                               "while the group is empty; a backfill cannot cover what the group "
                                               "skips later",
    "live group of one member, reset re-delivers little": "the group has 1 live member: a reset would wait until "
                                                          "they stop; a backfill does not disturb them",
}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_it_recommends_one_repair_with_its_reason(case: Case):
    recommendation = recommend(group=case.group, findings=case.findings)
    assert (recommendation.action, recommendation.finding_ids, recommendation.jobs) == (
        case.action, case.finding_ids, case.jobs), case.why
    assert recommendation.reason == (case.reason or REASONS[case.name]), case.why


def test_a_recommendation_carries_the_numbers_it_was_made_from():
    assert recommend(group=LIVE, findings=[finding()]) == Recommendation(
        "backfill", "a reset would re-deliver 600 offsets to recover at most 40: replay only the missed ranges",
        finding_ids=(1,), redelivered=600, missed_at_most=40)


@pytest.mark.parametrize(("state", "members", "empty", "why"), [
    ("Empty", 0, True, "the broker accepts offset commits from nobody else"),
    ("Dead", 0, True, "a Dead group has no member"),
    ("Stable", 0, True, "no member at the last poll, whatever the state says"),
    ("Stable", 3, False, "live members: the broker answers UNKNOWN_MEMBER_ID to a commit"),
    ("PreparingRebalance", 1, False, "a rebalancing group still has members"),
])
def test_a_group_is_empty_without_live_members(state, members, empty, why):
    assert group_is_empty(state=state, member_count=members) is empty, why


def test_totals_add_up_per_topic_group_and_cluster():
    findings = [finding(1), finding(2, partition=3, definite=5, possible=0),
                finding(3, topic="payments", state="covered", definite=0, possible=0)]
    [cluster] = triage(findings=findings, groups={LIVE.key: LIVE})
    [group] = cluster.groups
    assert cluster.totals == group.totals == Totals(missed_definite=35, missed_possible=10, partitions=3, covered=1)
    assert [(t.topic, t.totals) for t in group.topics] == [
        ("orders", Totals(35, 10, 2, 0)), ("payments", Totals(0, 0, 1, 1))]
    assert [f.partition for f in group.topics[0].findings] == [2, 3]
    assert group.topics[1].recommendation.action == "none"

def test_a_topics_repair_weighs_its_groups_members():
    # 45 re-delivered for 40 missed: the group decides; its 2 live members make it a backfill, per topic too.
    [cluster] = triage(findings=[finding(committed=45)], groups={LIVE.key: LIVE})
    [topic] = cluster.groups[0].topics
    assert topic.recommendation == cluster.groups[0].recommendation == recommend(group=LIVE, findings=[
        finding(committed=45)])
    assert topic.recommendation.reason.startswith("the group has 2 live members")


@dataclass(frozen=True)
class OrderCase:
    group: GroupInfo
    findings: tuple[OpenFinding, ...]
    why: str


def _group(key: int, name: str, *, members: int, cluster: str = "prod") -> GroupInfo:
    return GroupInfo(key=key, cluster=cluster, group_id=name, state="Stable" if members else "Empty",
                     member_count=members)


# The order the page must show, most urgent first.
ORDER = [
    OrderCase(_group(10, "zz-live-small", members=1), (finding(10, group=_group(10, "", members=1), definite=5),),
              "live members and a definite loss come first, even with a smaller loss and a later name"),
    OrderCase(_group(11, "aa-empty-big", members=0), (finding(11, group=_group(11, "", members=0), definite=900),),
              "a definite loss without live members: nobody is reading on, second"),
    OrderCase(_group(12, "bb-possible", members=3),
              (finding(12, group=_group(12, "", members=3), definite=0, possible=50),),
              "only a possible loss: may have been read, third"),
    OrderCase(_group(13, "cc-pending", members=0),
              (finding(13, group=_group(13, "", members=0), state="pending", definite=0, possible=0),),
              "at risk but nothing lost yet: with the possible losses, after them by size (0) then name"),
    OrderCase(_group(14, "aa-covered", members=2),
              (finding(14, group=_group(14, "", members=2), state="covered", definite=0, possible=0),),
              "covered only: good news, last, whatever its name"),
]


def test_groups_with_live_members_and_definite_loss_come_first():
    groups = {case.group.key: case.group for case in ORDER}
    findings = [f for case in reversed(ORDER) for f in case.findings]
    [cluster] = triage(findings=findings, groups=groups)
    assert [g.group.group_id for g in cluster.groups] == [case.group.group_id for case in ORDER], \
        [case.why for case in ORDER]
    assert [g.rank for g in cluster.groups] == [0, 1, 2, 2, 3]
    assert cluster.groups[0].live and not cluster.groups[1].live


def test_within_a_rank_the_bigger_loss_comes_first():
    small, big = _group(1, "a", members=1), _group(2, "b", members=1)
    findings = [finding(1, group=small, definite=5), finding(2, group=big, definite=50)]
    [cluster] = triage(findings=findings, groups={1: small, 2: big})
    assert [g.group.group_id for g in cluster.groups] == ["b", "a"]


def test_one_record_definitely_missed_is_a_definite_loss():
    # The smallest definite loss still ranks above a larger possible one: a record is known to be lost.
    one, possible = _group(1, "b-one", members=1), _group(2, "a-possible", members=1)
    findings = [finding(1, group=one, definite=1, possible=0), finding(2, group=possible, definite=0, possible=90)]
    [cluster] = triage(findings=findings, groups={1: one, 2: possible})
    assert [(g.group.group_id, g.rank) for g in cluster.groups] == [("b-one", 0), ("a-possible", 2)]


def test_clusters_come_by_their_most_urgent_group_then_name():
    calm = _group(1, "g", members=2, cluster="a-calm")
    urgent = _group(2, "g", members=2, cluster="z-urgent")
    findings = [finding(1, group=calm, state="covered", definite=0, possible=0), finding(2, group=urgent)]
    assert [c.cluster for c in triage(findings=findings, groups={1: calm, 2: urgent})] == ["z-urgent", "a-calm"]


def test_no_open_findings_is_an_empty_triage():
    assert triage(findings=[], groups={}) == ()


def test_a_slice_of_the_triage_keeps_its_order_and_each_clusters_totals():
    from groups.domain.triage import ClusterTriage, Totals, triage_slice

    def cluster(name: str, groups: int) -> ClusterTriage:
        return ClusterTriage(cluster=name, totals=Totals(missed_definite=groups, missed_possible=0, partitions=groups,
                                                         covered=0), groups=tuple(f"{name}-{n}" for n in range(groups)))

    clusters = (cluster("a", 3), cluster("b", 2), cluster("c", 4))
    page = triage_slice(clusters, start=2, stop=6)
    assert [(c.cluster, c.groups) for c in page] == [("a", ("a-2",)), ("b", ("b-0", "b-1")), ("c", ("c-0",))]
    assert page[1].totals == clusters[1].totals  # totals over the whole cluster, not the page
    assert triage_slice(clusters, start=0, stop=9) == clusters
    assert triage_slice(clusters, start=9, stop=12) == ()


def test_the_outline_orders_groups_from_their_totals_alone():
    # The home page ranks every group from sums the database makes, and reads findings only for
    # the page it shows: the outline's order must be the full triage's, group by group.
    from groups.domain.triage import triage_fill, triage_outline

    groups = {case.group.key: case.group for case in ORDER}
    findings = [f for case in reversed(ORDER) for f in case.findings]
    full = triage(findings=findings, groups=groups)
    totals = {case.group.key: Totals.of(case.findings) for case in ORDER}
    outline = triage_outline(totals=totals, groups=groups)
    assert [(g.group.group_id, g.rank, g.totals) for g in outline[0].groups] == [
        (g.group.group_id, g.rank, g.totals) for g in full[0].groups]
    assert outline[0].totals == full[0].totals
    assert triage_fill(outline, findings=findings) == full


def test_a_filled_page_keeps_its_clusters_totals_and_drops_groups_whose_findings_closed():
    from groups.domain.triage import triage_fill, triage_outline

    urgent, calm = _group(1, "a-urgent", members=1), _group(2, "b-calm", members=1)
    findings = [finding(1, group=urgent, definite=50), finding(2, group=calm, definite=5)]
    outline = triage_outline(totals={1: Totals.of(findings[:1]), 2: Totals.of(findings[1:])},
                             groups={1: urgent, 2: calm})
    # Between the outline and the fill, a-urgent's only finding was closed: its card is left out,
    # the cluster's totals stay those the page's numbering was made from.
    [cluster] = triage_fill(outline, findings=findings[1:])
    assert [g.group.group_id for g in cluster.groups] == ["b-calm"]
    assert cluster.totals == Totals(missed_definite=55, missed_possible=20, partitions=2, covered=0)
    assert triage_fill(outline, findings=[]) == ()
