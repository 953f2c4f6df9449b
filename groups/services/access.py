"""Team scopes enforced where things change (issue 23, item 4): every
service that acts on a finding, a job or a group asks here first, so the
pages, the API, bulk selections, the admin and the command line refuse the
same things in the same words. Reads are limited by ``groups.selectors.access``.

What the audit log keeps of an action (``act_detail``): the identity as
the provider gave it (source, issuer, subject, username) and the grant
that allowed it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied

from groups.domain.scopes import APPROVER, Grant
from groups.models import DirectoryIdentity, Finding
from groups.selectors.access import may_approve, scope_of


class OutOfScope(PermissionDenied):
    """The person holds the role, but not for this cluster, group or topic."""


def _where(finding: Finding) -> str:
    return f"group {finding.group.group_id!r} on topic {finding.topic.name!r} of cluster {finding.cluster.name!r}"


def approver_require(user, *, doing: str = "approving remediations") -> None:
    """Who may approve, checked once per request, by the service that acts
    (the pages and the API call the service and let its PermissionDenied be
    the 403): the approver role (``selectors.access.may_approve``); scopes
    are checked per finding and group besides (``scope_require_act``)."""
    if not may_approve(user):
        raise PermissionDenied(f"{doing} needs the approver role")


def scope_require_act(user, findings: Iterable[Finding]) -> tuple[Grant, ...]:
    """The grants that let ``user`` act on each finding (one per finding, in
    order); OutOfScope naming the first finding none covers."""
    scope = scope_of(user)
    grants = []
    for finding in findings:
        grant = scope.may_act_on_finding(finding)
        if grant is None:
            raise OutOfScope(f"finding {finding.id} ({_where(finding)}) is outside your scope: "
                             "no approver role of yours covers it")
        grants.append(grant)
    return tuple(grants)


def scope_refusal(user, finding: Finding) -> str:
    """Why ``user`` may not act on ``finding`` ("" when they may): for bulk
    selections, which refuse finding by finding."""
    try:
        scope_require_act(user, [finding])
    except OutOfScope as error:
        return str(error)
    return ""


def scope_require_group(user, *, cluster: str, group: str) -> Grant:
    grant = scope_of(user).may(APPROVER, cluster=cluster, group=group)
    if grant is None:
        raise OutOfScope(f"group {group!r} of cluster {cluster!r} is outside your scope: "
                         "no approver role of yours covers it")
    return grant


def scope_require_cluster_manager(user) -> None:
    if not scope_of(user).manages_clusters:
        raise OutOfScope("adding and changing clusters needs an approver role limited to no team scope")


def act_detail(user, grants: Iterable[Grant] = ()) -> dict:
    """Who acted, as their provider named them, and the grant(s) that allowed it."""
    identity = DirectoryIdentity.objects.filter(user=user).first() if user is not None and user.pk else None
    who = ({"source": identity.source, "issuer": identity.issuer, "subject": identity.subject}
           if identity is not None else {"source": "local"})
    return {"identity": {**who, "username": user.get_username() if user is not None else ""},
            "scope": sorted({grant.source or grant.describe() for grant in grants})}


def same_person(one, other) -> bool:
    """Two accounts of one person: the same account, or accounts that share an
    e-mail address (a local break-glass account and the same person's single
    sign-on account). Four-eyes needs two people, not two logins."""
    if one is None or other is None:
        return False
    if one.pk == other.pk:
        return True
    return bool(one.email) and one.email.strip().lower() == (other.email or "").strip().lower()
