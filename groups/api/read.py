"""The read-only endpoints: findings, clusters, topics, groups, jobs; every
list paginated by groups.api.pagination.PageNumbers."""


from django.http import Http404, HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate

from groups.selectors.access import scope_of, visible_clusters, visible_groups, visible_jobs, visible_topics
from groups.selectors.finding import finding_audit_events_list, finding_get, finding_group_members, finding_jobs_list
from groups.selectors.lists import clusters_list, findings_list, groups_list, topics_list
from groups.services.previews import finding_repair_options
from groups.api.pagination import PageNumbers
from groups.api.schemas import (
    ClusterOut, Error, FindingDetailOut, FindingFilters, FindingOut, GroupFilters, GroupOut, JobFilters, JobOut,
    PathId, TopicFilters, TopicOut,
)
from groups.models import Finding
from groups.models import RemediationJob
from groups.selectors.jobs import jobs_all

router = Router()
_ERRORS = {400: Error, 401: Error, 403: Error}


@router.get("findings", response={200: list[FindingOut], **_ERRORS}, operation_id="findings_list",
            summary="Findings, newest first.")
@paginate(PageNumbers)
def findings(request: HttpRequest, filters: Query[FindingFilters]):
    return findings_list(**filters.selector_filters(), scope=scope_of(request.user))


@router.get("findings/{id}", response={200: FindingDetailOut, **_ERRORS, 404: Error}, operation_id="finding_get",
            summary="One finding, open or closed: its evidence, the group's members, what each repair would do "
            "and its audit trail.")
def finding(request: HttpRequest, id: PathId):
    try:
        row = finding_get(finding_id=id)
    except Finding.DoesNotExist:
        raise Http404(f"no finding {id}") from None
    if scope_of(request.user).may_read_finding(row) is None:
        raise Http404(f"no finding {id}")  # outside the caller's scope: not shown to exist
    jobs = list(finding_jobs_list(finding=row))
    active = next((job.id for job in jobs if job.status in RemediationJob.ACTIVE), None)
    repair = finding_repair_options(finding=row, active_job=active)
    row.group_members = finding_group_members(finding=row)
    row.recommendation, row.repair_options = repair["recommendation"], repair["options"]
    row.job_ids = [job.id for job in jobs]
    row.audit = list(finding_audit_events_list(finding=row, job_ids=row.job_ids))
    return row


@router.get("clusters", response={200: list[ClusterOut], **_ERRORS}, operation_id="clusters_list",
            summary="Clusters by name.")
@paginate(PageNumbers)
def clusters(request: HttpRequest):
    return visible_clusters(scope_of(request.user), clusters_list())


@router.get("topics", response={200: list[TopicOut], **_ERRORS}, operation_id="topics_list",
            summary="Topics by cluster and name.")
@paginate(PageNumbers)
def topics(request: HttpRequest, filters: Query[TopicFilters]):
    return visible_topics(scope_of(request.user), topics_list(
        cluster=filters.cluster, name=filters.topic, name_contains=filters.topic_contains))


@router.get("groups", response={200: list[GroupOut], **_ERRORS}, operation_id="groups_list",
            summary="Consumer groups by cluster and group id.")
@paginate(PageNumbers)
def groups(request: HttpRequest, filters: Query[GroupFilters]):
    return visible_groups(scope_of(request.user), groups_list(
        cluster=filters.cluster, group_id=filters.group, group_id_contains=filters.group_contains,
        group_type=filters.group_type))


@router.get("jobs", response={200: list[JobOut], **_ERRORS}, operation_id="jobs_list",
            summary="Remediation jobs, newest first.")
@paginate(PageNumbers)
def jobs(request: HttpRequest, filters: Query[JobFilters]):
    queryset = visible_jobs(scope_of(request.user), jobs_all())
    queryset = queryset.select_related("cluster", "group", "requested_by", "approved_by").prefetch_related(
        "job_findings")
    if filters.status:
        queryset = queryset.filter(status=filters.status)
    if filters.kind:
        queryset = queryset.filter(kind=filters.kind)
    return queryset
