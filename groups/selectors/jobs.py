"""Remediation and expansion jobs, and webhooks, as their executors and the recovery task
read them: the row to run, its status as it is now, the jobs left without an
executor."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db.models import QuerySet

from groups.models import ExpansionJob, Finding, JobFinding, Notification, RemediationJob


def job_to_run(*, job_id: int) -> RemediationJob:
    """The job with its cluster and group (RemediationJob.DoesNotExist when it is gone)."""
    return RemediationJob.objects.select_related("cluster", "group").get(id=job_id)


def jobs_all() -> QuerySet[RemediationJob]:
    """Every remediation job, for a caller that scopes it (``selectors.access.visible_jobs``)."""
    return RemediationJob.objects.all()


def job_get(*, job_id: int) -> RemediationJob:
    return RemediationJob.objects.get(id=job_id)


def job_find_backfill(*, job_id: int) -> RemediationJob | None:
    return RemediationJob.objects.filter(id=job_id, kind=RemediationJob.Kind.BACKFILL).first()


def job_status(*, job_id: int) -> str:
    """The job's status as stored now (another process may have moved it)."""
    return RemediationJob.objects.values_list("status", flat=True).get(id=job_id)


def job_kind(*, job_id: int) -> str:
    return RemediationJob.objects.values_list("kind", flat=True).get(id=job_id)


def job_result(*, job_id: int) -> dict:
    """The job's result as stored now."""
    return RemediationJob.objects.values_list("result", flat=True).get(id=job_id) or {}


def job_statuses(*, job_ids: Collection[int]) -> dict[int, str]:
    """id -> status of those jobs that exist."""
    return dict(RemediationJob.objects.filter(id__in=list(job_ids)).values_list("id", "status"))


def job_ids_running() -> list[int]:
    return list(RemediationJob.objects.filter(status=RemediationJob.Status.RUNNING).values_list("id", flat=True))


def job_ids_stalled(*, untouched_since: datetime) -> list[int]:
    """Approved or queued jobs nobody touched since ``untouched_since``: their message was lost."""
    Status = RemediationJob.Status
    return list(RemediationJob.objects.filter(status__in=[Status.APPROVED, Status.QUEUED],
                                              updated_at__lt=untouched_since).values_list("id", flat=True))


def job_topic_ids(*, job: RemediationJob) -> dict[str, str]:
    """topic name -> the Kafka topic id its findings were made under (those that recorded one)."""
    return {topic: topic_id for topic, topic_id in
            job.findings.values_list("topic__name", "generation__kafka_topic_id") if topic_id}


def job_finding_partitions(*, job: RemediationJob) -> list[tuple[str, int]]:
    """(topic, partition) of the job's findings, sorted, once each."""
    return sorted(set(job.findings.values_list("topic__name", "partition")))


def job_findings_list(*, job: RemediationJob) -> QuerySet[Finding]:
    """The job's findings for its page, by topic and partition."""
    return job.findings.select_related("topic", "generation", "cluster", "group").order_by("topic__name", "partition")


def job_links() -> QuerySet[JobFinding]:
    """Finding-to-job links, newest job first (to prefetch onto findings)."""
    return JobFinding.objects.select_related("job").order_by("-job__created_at", "-job_id")


def expansion_job_to_run(*, job_id: int) -> ExpansionJob:
    """The expansion job with its cluster and topic (ExpansionJob.DoesNotExist when it is gone)."""
    return ExpansionJob.objects.select_related("cluster", "topic").get(id=job_id)


def notification_pending(*, notification_id: int) -> Notification | None:
    """The webhook still to send, or None when it was sent, given up or deleted."""
    return Notification.objects.filter(id=notification_id, status=Notification.Status.PENDING).first()


def backfills_waiting() -> list[int]:
    """Queued backfills, oldest first: each launch takes the next free slot."""
    return list(RemediationJob.objects.filter(kind=RemediationJob.Kind.BACKFILL, status=RemediationJob.Status.QUEUED)
                .order_by("created_at", "id").values_list("id", flat=True))
