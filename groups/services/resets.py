"""Reset jobs nobody clicked: the command line's, auto-repair's, and the
retry of waiting resets after a poll. Every job is still written by
``remediation.job_create``; this module only decides which ones.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from groups.domain.planning import PlannedReset, ResetTarget, plan_reset
from groups.domain.snapshot import Snapshot
from groups.models import Cluster, ConsumerGroup, Finding, RemediationJob
from groups.services import dispatch
from groups.services.previews import positions_of
from groups.services.remediation import SOURCE_AUTO_REPAIR, DuplicateJob, job_create

log = logging.getLogger(__name__)


def reset_job_create(
    *, cluster: Cluster, group: ConsumerGroup, target: ResetTarget, plan: list[PlannedReset], source: str,
    enqueue: bool,
) -> RemediationJob:
    """An approved reset job on behalf of the system (``source``: "cli" or
    "auto-repair"), audited as a system action naming its source. Open
    findings of the group on the planned partitions are linked, so the
    dashboard shows the job and no second job can start on them
    (DuplicateJob)."""
    keys = {(p.topic, p.partition) for p in plan}
    findings = [
        f for f in Finding.objects.filter(cluster=cluster, group=group, closed_at__isnull=True).select_related("topic")
        if (f.topic.name, f.partition) in keys
    ]
    return job_create(
        cluster=cluster, group=group, kind=RemediationJob.Kind.RESET,
        params={"target": target.kind, "value": target.value, "source": source},
        plan=[p.as_dict() for p in plan], findings=findings, requested_by=None, source=source, enqueue=enqueue,
    )


def reset_auto_repair(*, finding_ids: Iterable[int], snapshot: Snapshot) -> list[int]:
    """The auto-repair policy, run when a poll created findings: for groups
    that opted in (``auto_repair``) and are Empty in this snapshot, reset the
    new partitions they have no commit on to their log start, at once —
    before the consumers return, so nothing is missed and nothing repeats.

    A partition the group already committed on is left to a person: it was
    read, and moving its offset would re-deliver or skip. Returns the ids of
    the jobs created (one per group).
    """
    empty = {g.group_id for g in snapshot.groups if g.state == "Empty" and not g.members}
    if not empty:
        return []
    by_group: dict[int, list[Finding]] = defaultdict(list)
    for finding in Finding.objects.filter(
        id__in=list(finding_ids), group__auto_repair=True, closed_at__isnull=True, committed_offset__isnull=True
    ).select_related("cluster", "group", "topic"):
        if finding.group.group_id in empty:
            by_group[finding.group_id].append(finding)
    target = ResetTarget("earliest")
    created = []
    for findings in by_group.values():
        plan = plan_reset(target=target, positions=positions_of(findings))
        try:
            job = reset_job_create(cluster=findings[0].cluster, group=findings[0].group, target=target, plan=plan,
                                   source=SOURCE_AUTO_REPAIR, enqueue=True)
        except DuplicateJob as duplicate:
            log.info("auto-repair of group %r skipped: %s", findings[0].group.group_id, duplicate)
            continue
        created.append(job.id)
    return created


def reset_jobs_retry_waiting(*, cluster_id: int) -> list[int]:
    """After a successful poll of a cluster: enqueue every waiting reset job of
    it again (its group may be Empty now). Compare-and-set makes a job
    enqueued twice run once."""
    job_ids = list(
        RemediationJob.objects.filter(cluster_id=cluster_id, kind=RemediationJob.Kind.RESET,
                                      status=RemediationJob.Status.WAITING)
        .order_by("id").values_list("id", flat=True)
    )
    for job_id in job_ids:
        dispatch.task_enqueue_on_commit(dispatch.RUN_REMEDIATION_JOB, job_id)
    return job_ids
