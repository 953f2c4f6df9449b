"""The read-only endpoints: findings, clusters, topics, groups, jobs; every
list paginated by groups.api.pagination.PageNumbers."""


from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate

from groups.selectors.lists import clusters_list, findings_list, groups_list, topics_list
from groups.api.pagination import PageNumbers
from groups.api.schemas import (
    ClusterFilter, ClusterOut, Error, FindingFilters, FindingOut, GroupOut, JobFilters, JobOut, TopicOut,
)
from groups.models import RemediationJob

router = Router()
_ERRORS = {400: Error, 401: Error, 403: Error}


@router.get("findings", response={200: list[FindingOut], **_ERRORS}, operation_id="findings_list",
            summary="Findings, newest first.")
@paginate(PageNumbers)
def findings(request: HttpRequest, filters: Query[FindingFilters]):
    return findings_list(cluster=filters.cluster, topic=filters.topic, group=filters.group,
                                   state=filters.state, include_closed=filters.include_closed)


@router.get("clusters", response={200: list[ClusterOut], **_ERRORS}, operation_id="clusters_list",
            summary="Clusters by name.")
@paginate(PageNumbers)
def clusters(request: HttpRequest):
    return clusters_list()


@router.get("topics", response={200: list[TopicOut], **_ERRORS}, operation_id="topics_list",
            summary="Topics by cluster and name.")
@paginate(PageNumbers)
def topics(request: HttpRequest, filters: Query[ClusterFilter]):
    return topics_list(cluster=filters.cluster)


@router.get("groups", response={200: list[GroupOut], **_ERRORS}, operation_id="groups_list",
            summary="Consumer groups by cluster and group id.")
@paginate(PageNumbers)
def groups(request: HttpRequest, filters: Query[ClusterFilter]):
    return groups_list(cluster=filters.cluster)


@router.get("jobs", response={200: list[JobOut], **_ERRORS}, operation_id="jobs_list",
            summary="Remediation jobs, newest first.")
@paginate(PageNumbers)
def jobs(request: HttpRequest, filters: Query[JobFilters]):
    queryset = RemediationJob.objects.select_related("cluster", "group", "requested_by", "approved_by")
    queryset = queryset.prefetch_related("job_findings")
    if filters.status:
        queryset = queryset.filter(status=filters.status)
    if filters.kind:
        queryset = queryset.filter(kind=filters.kind)
    return queryset
