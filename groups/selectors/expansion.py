"""What an expansion's plan reads (issue 33, item 1): the topic with its
produce rate, and every group reading it as the last poll stored it, in the
pure core's types (``groups.domain.expansion.plan``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from groups.domain.expansion.plan import ProduceRate, ReaderFacts, TopicFacts, produce_rate, sink_problem
from groups.models import Finding, GroupTopic, Topic


@dataclass(frozen=True)
class RateSamples:
    """When the two end-offset sums behind the rate were read (None: not yet)."""

    measured_from: datetime | None
    measured_until: datetime | None


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def topic_facts(*, topic: Topic) -> tuple[TopicFacts, RateSamples]:
    """The topic's partition count and produce rate (its last two end-offset samples)."""
    rate: ProduceRate | None = produce_rate(
        previous_end=topic.previous_end_offsets, previous_at=_seconds(topic.previous_end_offsets_at),
        end=topic.end_offsets, at=_seconds(topic.end_offsets_at))
    samples = RateSamples(topic.previous_end_offsets_at, topic.end_offsets_at) if rate else RateSamples(None, None)
    return TopicFacts(name=topic.name, partitions=topic.partition_count, rate=rate), samples


def expansion_readers(*, topic: Topic, readers: QuerySet[GroupTopic]) -> list[ReaderFacts]:
    """Each group of ``readers`` (GroupTopic rows of ``topic``) that the
    cluster still lists, with what decides its plan: members, declared
    policy, a share group's config, its commits on the topic, the evidence
    and guard reports of its findings, and whether its sink can take a backfill."""
    rows = list(readers.filter(topic=topic, group__present=True).select_related("group"))
    group_ids = [row.group_id for row in rows]
    existing = set(Topic.objects.filter(cluster_id=topic.cluster_id, deleted=False).values_list("name", flat=True))
    evidence: dict[int, str] = {}
    guard: dict[int, str] = {}
    proofs = (Finding.objects.filter(group_id__in=group_ids, policy_source__in=("evidenced", "guard"))
              .select_related("topic").order_by("-created_at", "-id"))
    for finding in proofs:
        where = f"{finding.topic.name} [{finding.partition}]"
        if finding.policy_source == "evidenced" and finding.state == Finding.State.COVERED:
            evidence.setdefault(finding.group_id, (
                f"proven by evidence: its first commit {finding.first_commit} on {where} was below the high "
                f"watermark {finding.pre_pickup_high_watermark} seen before it took the partition, which a latest "
                "consumer cannot commit"))
        elif finding.policy_source == "guard":
            guard.setdefault(finding.group_id, f"its members run Gapwatch's guard: it reported a start offset on "
                                               f"{where}")
    facts = []
    for row in rows:
        group = row.group
        facts.append(ReaderFacts(
            group_id=group.group_id, type=group.type, state=group.state, members=group.member_count,
            declared_policy=group.declared_policy, reset_setting=group.reset_setting,
            commits_on_topic=any(p.get("committed") is not None for p in row.partitions),
            evidence=evidence.get(group.id, ""), guard=guard.get(group.id, ""), sink=group.backfill_sink,
            sink_problem=sink_problem(sink=group.backfill_sink, replay_topic=group.replay_topic, topic=topic.name,
                                      existing_topics=existing),
            internal_topics=streams_internal_topics(group.group_id, existing) if group.type == "streams" else (),
            assignor=group.assignor,
        ))
    return facts


def streams_internal_topics(application_id: str, topics: Collection[str]) -> tuple[str, ...]:
    """The repartition and changelog topics Kafka Streams names after an application (its group id)."""
    return tuple(sorted(name for name in topics if name.startswith(f"{application_id}-")
                        and name.endswith(("-repartition", "-changelog"))))


def expansion_findings(*, job) -> dict[tuple[str, int], Finding]:
    """The newest finding of each (group id, new partition) of an expansion
    job: those the watcher made for the partitions it added (created after
    its approval)."""
    rows = (Finding.objects.filter(cluster_id=job.cluster_id, topic_id=job.topic_id,
                                   partition__gte=job.from_partitions, partition__lt=job.to_partitions,
                                   created_at__gte=job.approved_at or job.created_at)
            .select_related("cluster", "group", "topic").order_by("created_at", "id"))
    return {(finding.group.group_id, finding.partition): finding for finding in rows}


def expansion_jobs_to_resume(*, stalled_before) -> list[int]:
    """Expansion jobs ``running`` or ``approved`` untouched since
    ``stalled_before`` (whose executor may be gone: the caller checks the
    job's lock); a running job's every run touches it."""
    from groups.models import ExpansionJob

    return list(ExpansionJob.objects.filter(
        status__in=[ExpansionJob.Status.RUNNING, ExpansionJob.Status.APPROVED], updated_at__lt=stalled_before)
        .order_by("id").values_list("id", flat=True))


def expansion_jobs_visible(*, user):
    """The expansion jobs whose topic the person's scope lets them read, newest first."""
    from groups.models import ExpansionJob
    from groups.selectors.access import scope_of

    rows = ExpansionJob.objects.select_related("cluster", "topic", "requested_by", "approved_by")
    return scope_of(user).rows(rows, cluster="cluster__name", topic="topic__name")


def expansions_adding_partition(*, user, topic_id: int, partition: int) -> list:
    """The expansions (visible to ``user``) that added ``partition`` to the topic: a finding's page links them."""
    return list(expansion_jobs_visible(user=user).filter(topic_id=topic_id, from_partitions__lte=partition,
                                                          to_partitions__gt=partition).order_by("-id"))


def expansions_queuing_backfill(*, user, cluster_id: int, group_id: str, job_id: int) -> list:
    """The expansions (visible to ``user``) whose decision for ``group_id`` queued backfill job ``job_id``
    (``decisions[group]["backfills"][partition]["job"]``): a job's page links them."""
    rows = expansion_jobs_visible(user=user).filter(cluster_id=cluster_id, decisions__has_key=group_id)
    return [expansion for expansion in rows.order_by("-id")
            if any(isinstance(backfill, dict) and backfill.get("job") == job_id
                   for backfill in (expansion.decisions[group_id].get("backfills") or {}).values())]


def expansion_group_pks(*, cluster_id: int, group_ids) -> dict[str, int]:
    """Each group id's row, to link an expansion's groups to their pages."""
    from groups.models import ConsumerGroup

    return dict(ConsumerGroup.objects.filter(cluster_id=cluster_id, group_id__in=list(group_ids))
                .values_list("group_id", "pk"))
