"""One finding's page and API answer: the finding with its cluster, group,
topic and generation, the jobs that worked on it, and its audit trail."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from groups.models import AuditEvent, Finding, RemediationJob


def finding_get(*, finding_id: int) -> Finding:
    """The finding, open or closed; ``Finding.DoesNotExist`` when no row has the id."""
    return Finding.objects.select_related(
        "cluster", "group", "topic", "generation", "closed_by", "resolved_by_job",
    ).get(id=finding_id)


def finding_jobs_list(*, finding: Finding) -> QuerySet[RemediationJob]:
    """The jobs linked to the finding, newest first."""
    return (
        RemediationJob.objects.filter(job_findings__finding=finding)
        .select_related("requested_by", "approved_by")
        .order_by("-created_at", "-id")
    )


def finding_audit_events_list(*, finding: Finding, job_ids: list[int]) -> QuerySet[AuditEvent]:
    """Audit rows about the finding, oldest first: those naming it, those of
    the jobs in ``job_ids`` (its jobs), and a poll's rows written before they
    named the finding (its group, topic, partition and generation in ``detail``)."""
    about_it = Q(object_type="finding", object_id=str(finding.id))
    of_its_jobs = Q(object_type="job", object_id__in=[str(job_id) for job_id in job_ids])
    unnamed_poll_rows = Q(
        object_type="", cluster_id=finding.cluster_id, action__startswith="finding.",
        detail__contains={"group": finding.group.group_id, "topic": finding.topic.name,
                          "partition": finding.partition, "generation": finding.generation.number},
    )
    return (
        AuditEvent.objects.filter(about_it | of_its_jobs | unnamed_poll_rows)
        .select_related("actor")
        .order_by("at", "id")
    )


def finding_group_members(*, finding: Finding) -> list[dict]:
    """The group's members as of the last poll (client id, host, member id),
    each with ``holds``: whether its assignment has the finding's partition;
    the holder first."""
    where = [finding.topic.name, finding.partition]
    members = [
        {"client_id": str(member.get("client_id", "")), "host": str(member.get("host", "")),
         "member_id": str(member.get("member_id", "")),
         "holds": where in [list(item) for item in member.get("assignment") or []]}
        for member in finding.group.members or []
    ]
    return sorted(members, key=lambda m: (not m["holds"], m["client_id"], m["member_id"]))
