"""Offset-reset remediation: the executor of ``reset`` jobs and the live
positions it (and the command line) plans from. Which reset jobs exist is
decided in ``groups.services`` (``remediation``, ``resets``).

The broker accepts an administrative offset commit only while a group has no
members (DESIGN.md section 1): a job whose group has members waits, and every
successful poll of its cluster tries it again, until the group is Empty or
RESET_WAIT_DEADLINE_SECONDS have passed since it started waiting. A reset is
done only when the offsets read back equal the plan.

A streams group (KIP-1071) is reset through ``StreamsGroupOffsets`` (its
state and members from Kafka's Java client). A share group (KIP-932) is
reset the same way through ``ShareGroupOffsets``:
its "committed" offset is its start offset (the lowest offset it may still
deliver), and the reset sets that start offset; the broker refuses it too
while the group has members.

Offsets are "the next message to read". Group ids are hostile text: they are
stored and audited as given and never formatted into markup here.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings
from django.utils import timezone

from groups.models import Cluster, ConsumerGroup, RemediationJob
from groups.selectors.jobs import job_finding_partitions, job_result, job_status, job_to_run
from groups.domain.planning import (
    PartitionPosition,
    PlanError,
    PlannedReset,
    ResetTarget,
    plan_reset,
    reset_drift,
    reset_mismatches,
)
from groups.services.jobs import job_record_plan, job_record_result, reset_record_applied
from groups.services.remediation import job_transition
from tasks.job_lock import job_lock
from adapters.kafka import AccessRefused, GroupNotEmpty, GroupStatus, KafkaAdapter, KafkaUnavailable
from adapters.kafka.java_admin import JavaAdmin
from tasks.cluster_client import java_client, kafka_client

log = logging.getLogger(__name__)
Status = RemediationJob.Status
# ``ConsumerGroup.type`` of a share group (KIP-932), as the poll stores it.
SHARE_GROUP = "share"
STREAMS_GROUP = "streams"


def reset_adapter(cluster: Cluster) -> KafkaAdapter:
    return kafka_client(cluster.cluster_config())


class GroupOffsets(Protocol):
    """What a reset reads and writes of one group: its state, its offsets on
    partitions (next message to read; None where it has none), and an
    administrative write of new ones, which raises ``GroupNotEmpty`` while the
    group has members. ``KafkaAdapter`` is it for consumer groups,
    ``ShareGroupOffsets`` for share groups."""

    def describe_group(self, *, group_id: str) -> GroupStatus: ...

    def committed_offsets(
        self, *, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int | None]: ...

    def alter_group_offsets(self, *, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None: ...


class ShareGroupOffsets:
    """A share group as a reset sees it, through Kafka's Java ``Admin``
    (``adapters.kafka.java_admin``): its offset on a partition is its start
    offset (SPSO, the lowest offset it may still deliver; None where it has
    not initialised the partition), and a reset sets the start offset. A
    group the broker does not know is "Dead" with no members, as for
    consumer groups."""

    def __init__(self, reader: JavaAdmin) -> None:
        self._reader = reader

    def describe_group(self, *, group_id: str) -> GroupStatus:
        described = self._reader.describe([group_id]).get(group_id)
        if described is None:
            return GroupStatus(group_id=group_id, state="Dead", type=SHARE_GROUP, member_count=0)
        return GroupStatus(group_id=group_id, state=described.state, type=SHARE_GROUP,
                           member_count=len(described.members))

    def committed_offsets(
        self, *, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int | None]:
        return self._reader.start_offsets_of(group_id=group_id, partitions=partitions)

    def alter_group_offsets(self, *, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        self._reader.alter_start_offsets(group_id=group_id, offsets=offsets)


class StreamsGroupOffsets:
    """A streams group (KIP-1071) as a reset sees it. Its commits are plain
    committed offsets, which the consumer-group calls read and alter (the
    broker serves them for a streams group); but confluent-kafka describes a
    streams group as a Dead classic group with no members even while its
    application runs, so its state and members come from Kafka's Java
    ``Admin`` (``describeStreamsGroups``), and the reset waits for none."""

    def __init__(self, reader: JavaAdmin, adapter: KafkaAdapter) -> None:
        self._reader, self._adapter = reader, adapter

    def describe_group(self, *, group_id: str) -> GroupStatus:
        state, members = self._reader.streams_group_states([group_id]).get(group_id, ("Dead", 0))
        return GroupStatus(group_id=group_id, state=state, type=STREAMS_GROUP, member_count=members)

    def committed_offsets(
        self, *, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int | None]:
        return self._adapter.committed_offsets(group_id=group_id, partitions=partitions)

    def alter_group_offsets(self, *, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        self._adapter.alter_group_offsets(group_id=group_id, offsets=offsets)


@contextmanager
def group_offsets_of(*, cluster: Cluster, group: ConsumerGroup, adapter: KafkaAdapter) -> Iterator[GroupOffsets]:
    """The face a reset of ``group`` goes through: ``adapter`` itself for a
    consumer group; for a share or streams group, a Java-client reader of the
    cluster (closed afterwards; the JVM stays for the process) behind
    ``ShareGroupOffsets`` or ``StreamsGroupOffsets``."""
    if group.type not in (SHARE_GROUP, STREAMS_GROUP):
        yield adapter
        return
    reader = java_client(cluster.cluster_config())
    try:
        yield ShareGroupOffsets(reader) if group.type == SHARE_GROUP else StreamsGroupOffsets(reader, adapter)
    finally:
        reader.close()


def active_group_reason(group: GroupStatus) -> str:
    if group.member_count:
        members = f"{group.member_count} active member{'' if group.member_count == 1 else 's'}"
        return f"group {group.group_id} has {members}; stop its consumers or choose a Spark backfill"
    return f"group {group.group_id} is {group.state or 'in an unknown state'}; waiting for it to be Empty"


def reset_positions(
    *, adapter: KafkaAdapter, offsets: GroupOffsets, group_id: str, partitions: Sequence[tuple[str, int]],
    target: ResetTarget,
) -> tuple[list[PartitionPosition], dict[tuple[str, int], int | None] | None]:
    """Live log start, high watermark and committed offset of each partition,
    and for a timestamp target the first offset at or after it. The
    committed offsets come from ``offsets`` (``group_offsets_of``: a share
    group's are its start offsets), the partitions' own from ``adapter``.

    A topic or partition that does not exist raises PlanError (never created,
    never retried); Kafka errors raise KafkaUnavailable.
    """
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    for topic, wanted in sorted(by_topic.items()):
        details = adapter.describe_topic(topic)
        if details is None:
            raise PlanError(f"topic {topic!r} does not exist on this cluster")
        existing = details.partition_ids
        missing = sorted(set(wanted) - set(existing))
        if missing:
            raise PlanError(f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
                            f"(its partitions are 0 to {max(existing)})")
    committed = offsets.committed_offsets(group_id=group_id, partitions=list(partitions))
    positions: list[PartitionPosition] = []
    at_time: dict[tuple[str, int], int | None] | None = {} if target.kind == "timestamp" else None
    for topic, wanted in sorted(by_topic.items()):
        offsets = adapter.partition_offsets(topic=topic, partitions=sorted(wanted))
        positions.extend(
            PartitionPosition(topic=topic, partition=p, log_start=offsets[p].log_start,
                              high_watermark=offsets[p].high_watermark, committed=committed[(topic, p)])
            for p in sorted(wanted)
        )
        if at_time is not None:
            found = adapter.offsets_for_times(topic=topic, partitions=sorted(wanted), timestamp_ms=target.value)
            at_time.update({(topic, p): offset for p, offset in found.items()})
    return positions, at_time


# -- executing a job ---------------------------------------------------------


def execute_reset(*, job_id: int, now: datetime | None = None,
                  adapter_for: Callable[[Cluster], KafkaAdapter] = reset_adapter) -> str:
    """Run one reset job; return its status afterwards. ``now`` (the clock's
    when None) is what the wait deadline is compared with; ``adapter_for``
    builds the Kafka adapter of the job's cluster (a test's may race it).

    1. Take the job's advisory lock (another executor holds it: leave the
       job alone). Only a queued or waiting job runs, or a running one whose
       executor died (we hold its lock); any other status is left alone, so a
       second run of a succeeded job changes nothing and keeps its result.
    2. A job waiting past its deadline fails, offsets untouched.
    3. Describe the group (a share group through ``ShareGroupOffsets``, every
       later step too). With members, the job waits (queued -> waiting once;
       later checks only refresh the reason).
    4. Empty or Dead: queued/waiting -> running, by compare-and-set.
    5. Read the live offsets; fail if a commit moved since the plan; plan again
       from the live log start and high watermark (a timestamp is resolved
       now) and store that plan on the job before committing.
    6. Commit. UNKNOWN_MEMBER_ID, or a share group's GroupNotEmptyException
       (the group became active since step 3): back to waiting. A refusal by
       the cluster's ACLs (in step 3 too): failed at once, naming the missing
       ACL. Any other Kafka error: waiting too, as the commit may or may not
       have applied; the next attempt accepts offsets already at the plan.
    7. Read back; succeed only when equal to the plan. Audit ``offsets.reset``
       with before and after per partition.
    """
    job = job_to_run(job_id=job_id)
    if job.kind != RemediationJob.Kind.RESET:
        raise ValueError(f"job {job_id} is a {job.kind} job, not a reset")
    with job_lock(job_id) as locked:
        if not locked:
            return "running elsewhere"
        job.refresh_from_db()
        return _execute_locked(job, now=now or timezone.now(), adapter_for=adapter_for)


def _execute_locked(job: RemediationJob, *, now: datetime,
                    adapter_for: Callable[[Cluster], KafkaAdapter]) -> str:
    if job.status not in (Status.QUEUED, Status.WAITING, Status.RUNNING):
        return job.status
    deadline = _wait_deadline(job)
    if deadline is not None and now >= deadline:
        job_transition(
            job_id=job.id, from_statuses=[Status.WAITING], to_status=Status.FAILED,
            status_reason=f"gave up after waiting {settings.RESET_WAIT_DEADLINE_SECONDS}s for the group to be Empty",
            error=f"deadline passed while waiting: {job.status_reason}; offsets untouched",
        )
        return _status_of(job.id)
    adapter = adapter_for(job.cluster)
    with group_offsets_of(cluster=job.cluster, group=job.group, adapter=adapter) as offsets:
        return _describe_and_reset(job, adapter=adapter, offsets=offsets)


def _describe_and_reset(job: RemediationJob, *, adapter: KafkaAdapter, offsets: GroupOffsets) -> str:
    """Steps 3 to 7 of ``execute_reset``."""
    try:
        # Metadata first: with the cluster away, a group request's coordinator
        # lookup outlives its timeout, and librdkafka 2.16 aborts the process
        # when the broker returns (tests/faults/test_kafka_faults.py).
        adapter.ping()
        group = offsets.describe_group(group_id=job.group.group_id)
    except AccessRefused as error:
        return _refused(job, from_status=job.status, error=error)
    except KafkaUnavailable as error:
        return _wait(job, from_status=job.status, reason=f"{error}; retried after the next successful poll")
    if not group.inactive:
        return _wait(job, from_status=job.status, reason=active_group_reason(group))
    restarted = " (restarted: the worker running it ended without a result)" if job.status == Status.RUNNING else ""
    if not job_transition(job_id=job.id, from_statuses=[job.status], to_status=Status.RUNNING,
                          status_reason=f"group is {group.state}: resetting its offsets{restarted}"):
        return _status_of(job.id)  # another worker moved it first
    try:
        return _reset_running(job, adapter=adapter, offsets=offsets, group=group)
    except GroupNotEmpty as error:
        reason = f"the broker refused the commit: the group became active ({error})"
        return _wait(job, from_status=Status.RUNNING, reason=reason)
    except AccessRefused as error:
        return _refused(job, from_status=Status.RUNNING, error=error)
    except KafkaUnavailable as error:
        return _wait(job, from_status=Status.RUNNING, reason=f"{error}; retried after the next successful poll")
    except PlanError as error:
        _fail(job, error=str(error))
        return _status_of(job.id)
    except Exception as error:
        # Never leave a job "running" behind: it would never be retried.
        _fail(job, error=f"unexpected error: {type(error).__name__}: {error}")
        raise


def _reset_running(job: RemediationJob, *, adapter: KafkaAdapter, offsets: GroupOffsets,
                   group: GroupStatus) -> str:
    target = ResetTarget.parse(kind=job.params.get("target", "earliest"), value=job.params.get("value"))
    target.require_not_future(now_ms=int(timezone.now().timestamp() * 1000))
    stored = [PlannedReset.from_dict(row) for row in job.plan]
    partitions = [(p.topic, p.partition) for p in stored] or _finding_partitions(job)
    if not partitions:
        raise PlanError("the job names no partition to reset")
    positions, at_time = reset_positions(adapter=adapter, group_id=group.group_id, partitions=partitions,
                                         target=target, offsets=offsets)
    before = {(p.topic, p.partition): p.committed for p in positions}
    moved = reset_drift(plan=stored, committed=before)
    if moved:
        raise PlanError(
            "the committed offsets moved since the plan, so this reset would overwrite someone else's change: "
            + "; ".join(moved) + ". Nothing was committed; retry the job to plan again from the current offsets."
        )
    # A plan shown to the operator keeps its `current`; a job without one
    # (a timestamp target from the dashboard) plans from the offsets read now.
    expected = {(p.topic, p.partition): p.current for p in stored} or before
    plan = plan_reset(target=target, positions=[replace(p, committed=expected[(p.topic, p.partition)])
                                                for p in positions], timestamp_offsets=at_time)
    job_record_plan(job_id=job.id, plan=[p.as_dict() for p in plan])
    offsets.alter_group_offsets(group_id=group.group_id, offsets={(p.topic, p.partition): p.planned for p in plan})
    after = offsets.committed_offsets(group_id=group.group_id, partitions=partitions)
    verified_at = timezone.now()
    rows = [
        {"topic": p.topic, "partition": p.partition, "before": before[(p.topic, p.partition)],
         "planned": p.planned, "after": after[(p.topic, p.partition)]}
        for p in plan
    ]
    mismatches = reset_mismatches(plan=plan, committed=after)
    reset_record_applied(job=job, group_id=group.group_id, target={"kind": target.kind, "value": target.value},
                         rows=rows, verified=not mismatches)
    result = {
        **{key: value for key, value in job.result.items() if key in ("waiting_since", "checks")},
        "target": {"kind": target.kind, "value": target.value},
        "group_state": group.state,
        "partitions": rows,
        "verified": not mismatches,
        "verified_at": verified_at.isoformat(),
        "approval_to_verified_seconds": (
            round((verified_at - job.approved_at).total_seconds(), 3) if job.approved_at else None
        ),
    }
    if stored and [p.as_dict() for p in plan] != job.plan:
        result["replanned_from"] = job.plan
    if mismatches:
        job_transition(job_id=job.id, from_statuses=[Status.RUNNING], to_status=Status.FAILED, result=result,
                       status_reason="offsets read back differ from the plan",
                       error="read back after the commit: " + "; ".join(mismatches))
    else:
        job_transition(job_id=job.id, from_statuses=[Status.RUNNING], to_status=Status.SUCCEEDED, result=result,
                       status_reason="offsets read back equal to the plan", error="")
    return _status_of(job.id)


def _finding_partitions(job: RemediationJob) -> list[tuple[str, int]]:
    return job_finding_partitions(job=job)


def _wait_deadline(job: RemediationJob) -> datetime | None:
    since = job.result.get("waiting_since") if job.status == Status.WAITING else None
    if not since:
        return None
    return datetime.fromisoformat(since) + timedelta(seconds=settings.RESET_WAIT_DEADLINE_SECONDS)


def _wait(job: RemediationJob, *, from_status: str, reason: str) -> str:
    """Park the job until the next successful poll. The deadline counts from
    the first time it waited; checks that find it still waiting change only
    the reason (no new status, so no new audit row)."""
    now = timezone.now()
    current = job_result(job_id=job.id)
    result = {**current, "waiting_since": current.get("waiting_since") or now.isoformat(),
              "checks": current.get("checks", 0) + 1, "last_check_at": now.isoformat()}
    if from_status == Status.WAITING:
        job_record_result(job_id=job.id, result=result, status=Status.WAITING, status_reason=reason)
    else:
        job_transition(job_id=job.id, from_statuses=[from_status], to_status=Status.WAITING,
                       status_reason=reason, result=result)
    return _status_of(job.id)


def _fail(job: RemediationJob, *, error: str) -> None:
    job_transition(job_id=job.id, from_statuses=[Status.RUNNING], to_status=Status.FAILED,
                   status_reason="offsets untouched", error=error)


def _refused(job: RemediationJob, *, from_status: str, error: AccessRefused) -> str:
    """A missing ACL or a refused login fails the job at once: waiting for the
    next poll would not grant it. The broker commits no partition it refuses."""
    job_transition(job_id=job.id, from_statuses=[from_status], to_status=Status.FAILED,
                   status_reason="refused by the cluster: the principal Gapwatch connects as may not do this",
                   error=str(error))
    return _status_of(job.id)


def _status_of(job_id: int) -> str:
    return job_status(job_id=job_id)
