"""Whose grants, and which rows they let a person see (team scopes,
``groups.domain.scopes``; issue 23, item 4).

``scope_of(user)`` is read once per request (kept on the user object):

- a superuser: one unlimited approver grant;
- a person of a directory (``DirectoryIdentity``): the grants of the role
  mappings of their directory groups, read at each request (a mapping
  changed in the admin applies at once; their directory groups are those
  of their last login);
- a local account: one unlimited grant per role group it is in (or, in
  none, approver when the account itself holds the approver's permission).

``Scope.rows(queryset, ...)`` filters a queryset in the database to what the
grants let the person read; with an unlimited grant it is the queryset
itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from groups.domain.scopes import APPROVER, VIEWER, Grant, covering, glob_to_regex, may_manage_clusters, \
    sees_everything
from groups.models import ApiToken, Cluster, DirectoryIdentity, Finding, RemediationJob, RoleMapping

_ROLE_GROUPS = (VIEWER, APPROVER)
APPROVE_PERMISSION = "groups.approve_remediation"


def may_approve(user) -> bool:
    """The approver role (repairs, dismissals, record reads): the one rule the
    pages, the API and the services ask; which findings it covers is the
    scope's (``Scope.may_act_on_finding``)."""
    return bool(user and user.is_authenticated and user.has_perm(APPROVE_PERMISSION))


@dataclass(frozen=True)
class Scope:
    grants: tuple[Grant, ...]

    @property
    def everything(self) -> bool:
        return sees_everything(self.grants)

    @property
    def manages_clusters(self) -> bool:
        return may_manage_clusters(self.grants)

    def may(self, role: str, *, cluster: str, group: str | None = None, topic: str | None = None) -> Grant | None:
        return covering(self.grants, role, cluster=cluster, group=group, topic=topic)

    def may_read_finding(self, finding) -> Grant | None:
        return self.may(VIEWER, cluster=finding.cluster.name, group=finding.group.group_id,
                        topic=finding.topic.name)

    def may_act_on_finding(self, finding) -> Grant | None:
        return self.may(APPROVER, cluster=finding.cluster.name, group=finding.group.group_id,
                        topic=finding.topic.name)

    def rows(self, queryset: QuerySet, *, cluster: str, group: str | None = None, topic: str | None = None,
             role: str = VIEWER) -> QuerySet:
        """``queryset`` limited to rows some grant covers for ``role``;
        ``cluster``, ``group`` and ``topic`` are the rows' field paths to the
        cluster's name, the group id and the topic's name (None: not checked)."""
        if any(g.unlimited and (role == VIEWER or g.role == APPROVER) for g in self.grants):
            return queryset
        allowed = Q(pk__in=[])
        for grant in self.grants:
            if role == APPROVER and grant.role != APPROVER:
                continue
            one = Q()
            if grant.clusters:
                clusters = Q(pk__in=[])
                for pattern in grant.clusters:
                    clusters |= Q(**{f"{cluster}__regex": glob_to_regex(pattern)})
                one &= clusters
            if group is not None and grant.groups != "*":
                one &= Q(**{f"{group}__regex": glob_to_regex(grant.groups)})
            if topic is not None and grant.topics != "*":
                one &= Q(**{f"{topic}__regex": glob_to_regex(grant.topics)})
            if not one:
                return queryset  # the grant covers every row of this kind (e.g. any group, on any cluster)
            allowed |= one
        return queryset.filter(allowed)


def grants_of(user) -> tuple[Grant, ...]:
    if user is None or not user.is_authenticated or not user.is_active:
        return ()
    if user.is_superuser:
        return (Grant(APPROVER, source="superuser"),)
    identity = DirectoryIdentity.objects.filter(user=user).first()
    if identity is None:
        roles = set(user.groups.filter(name__in=_ROLE_GROUPS).values_list("name", flat=True))
        if not roles and user.has_perm(APPROVE_PERMISSION):
            roles.add(APPROVER)  # in no role group, but given the approver's permission itself in the admin
        return tuple(Grant(role, source=f"local role {role}") for role in _ROLE_GROUPS if role in roles)
    mappings = RoleMapping.objects.filter(directory_group__in=identity.groups).order_by("id")
    return tuple(
        Grant(m.role, clusters=m.cluster_patterns, groups=m.group_pattern or "*", topics=m.topic_pattern or "*",
              source=f"role mapping {m.id}: {m.directory_group}")
        for m in mappings
    )


def scope_of(user) -> Scope:
    """The person's grants, read once per request (kept on ``user``)."""
    cached = getattr(user, "_gapwatch_scope", None)
    if cached is None:
        cached = Scope(grants_of(user))
        if user is not None:
            user._gapwatch_scope = cached
    return cached


# What a scope lets a person read, in the database (``Scope.rows``), per kind of row.

def visible_findings(scope: Scope, queryset: QuerySet, *, role: str = VIEWER) -> QuerySet:
    return scope.rows(queryset, cluster="cluster__name", group="group__group_id", topic="topic__name", role=role)


def visible_groups(scope: Scope, queryset: QuerySet) -> QuerySet:
    return scope.rows(queryset, cluster="cluster__name", group="group_id")


def visible_topics(scope: Scope, queryset: QuerySet) -> QuerySet:
    return scope.rows(queryset, cluster="cluster__name", topic="name")


def visible_clusters(scope: Scope, queryset: QuerySet) -> QuerySet:
    return scope.rows(queryset, cluster="name")


def visible_jobs(scope: Scope, queryset: QuerySet) -> QuerySet:
    """Jobs with a finding the person may read."""
    if scope.everything:
        return queryset
    readable = scope.rows(RemediationJob.objects.all(), cluster="cluster__name", group="group__group_id",
                          topic="job_findings__finding__topic__name")
    return queryset.filter(pk__in=readable.values("pk"))


def visible_audit_events(scope: Scope, queryset: QuerySet, *, user) -> QuerySet:
    """Events of clusters the person may read, and their own."""
    if scope.everything:
        return queryset
    clusters = visible_clusters(scope, Cluster.objects.all()).values("pk")
    return queryset.filter(Q(cluster__in=clusters) | Q(actor=user))


def actable_finding_ids(scope: Scope, finding_ids) -> set[int]:
    """Which of these findings the person may act on (their buttons are shown)."""
    ids = list(finding_ids)
    if not ids or not any(grant.role == APPROVER for grant in scope.grants):
        return set()
    if any(grant.role == APPROVER and grant.unlimited for grant in scope.grants):
        return set(ids)
    return set(visible_findings(scope, Finding.objects.filter(id__in=ids), role=APPROVER)
               .values_list("id", flat=True))


def user_named(*, username: str):
    """The account of that username, or None."""
    return get_user_model().objects.filter(username=username).first()


def users_with_identity(*, source: str, issuer: str, subject: str) -> QuerySet:
    """The account (at most one) whose directory identity is that subject of that issuer."""
    return get_user_model().objects.filter(directory_identity__source=source, directory_identity__issuer=issuer,
                                           directory_identity__subject=subject)


def api_tokens_of(*, user) -> QuerySet[ApiToken]:
    """The user's API tokens, newest first (their hashes only: a key is shown once, when made)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at")
