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


def approval_require(user, *, what: str, findings: Iterable[Finding] = (), cluster: str = "",
                     topics: Iterable[str] = (), requested_by=None) -> tuple[Grant, ...]:
    """The one rule of who may approve a job (a remediation, an expansion),
    asked once by the service that approves, whose PermissionDenied the
    pages and the API answer with:

    1. the approver role (``approver_require``);
    2. a grant of it over everything the job touches: each finding's group
       and topic (``scope_require_act``), each of ``topics`` of ``cluster``
       (OutOfScope naming the first none covers);
    3. four-eyes (FOUR_EYES): not the person who requested it, nor another
       account of theirs (``same_person``); ``requested_by`` None: nobody
       requested it apart from this person's own act (a refusal, a direct
       approval).

    The grants that allowed it, for the audit (``act_detail``)."""
    from django.conf import settings

    approver_require(user, doing=f"approving {what}")
    grants = list(scope_require_act(user, findings))
    for topic in topics:
        grant = scope_of(user).may(APPROVER, cluster=cluster, topic=topic)
        if grant is None:
            raise OutOfScope(f"topic {topic!r} of cluster {cluster!r} is outside your scope: "
                             "no approver role of yours covers it")
        grants.append(grant)
    if requested_by is not None and settings.FOUR_EYES and same_person(requested_by, user):
        raise PermissionDenied(f"four-eyes: the person who requested {what} cannot approve it "
                               "(not from another account of theirs either)")
    return tuple(grants)


def approval_refusal(user, **job) -> str:
    """Why ``user`` may not approve (``approval_require``'s words), "" when
    they may: what a page asks to offer the approve button or not."""
    try:
        approval_require(user, **job)
    except PermissionDenied as error:
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
