"""Logins through a directory (OpenID Connect, LDAP): the one place that turns
what the provider said about a person into a Gapwatch user and roles
(issue 23, items 1-3).

At every such login ``identity_login``:

1. records who the provider says the user is (``DirectoryIdentity``: source,
   issuer, subject, the directory groups);
2. sets the user's roles to exactly those the ``RoleMapping`` rows give
   their directory groups: someone removed from a directory group loses its
   role at their next login (and their open sessions keep what they had until
   then, at most SESSION_COOKIE_AGE);
3. audits a change of roles (``identity.roles_changed``), with the identity
   as the provider gave it.

Local accounts (no directory identity) keep the roles an administrator gives
them in the admin; LOCAL_LOGIN=0 switches their password login off.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import hashlib

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from groups.models import DirectoryIdentity, RoleMapping
from groups.roles import ROLE_PERMISSIONS, ensure_roles
from groups.services.audit import audit_record


@dataclass(frozen=True)
class Identity:
    """What a provider said about a person at one login."""

    source: str  # DirectoryIdentity.Source
    issuer: str
    subject: str
    username: str
    groups: tuple[str, ...] = ()
    email: str = ""
    first_name: str = ""
    last_name: str = ""


def mapped_roles(directory_groups: Iterable[str]) -> set[str]:
    """The roles the mappings give these directory groups."""
    names = set(directory_groups)
    return set(RoleMapping.objects.filter(directory_group__in=names).values_list("role", flat=True))


def _unique_username(wanted: str, subject: str) -> str:
    wanted = (wanted or "user")[:120]
    if not get_user_model().objects.filter(username=wanted).exists():
        return wanted
    return f"{wanted}-{hashlib.sha256(subject.encode()).hexdigest()[:8]}"


def directory_user_create(*, identity: Identity):
    """A new account for a person the provider knows and Gapwatch does not:
    named ``identity.username`` (with a suffix if that name is taken: an
    existing account is never taken over), without a usable password."""
    user = get_user_model().objects.create_user(_unique_username(identity.username or identity.email,
                                                                 identity.subject), email=identity.email)
    user.set_unusable_password()  # a person of the provider never logs in with a Gapwatch password
    user.save(update_fields=["password"])
    return user


def identity_login(*, user, identity: Identity) -> set[str]:
    """Steps 1-3 above for ``user`` (found by its identity, or just made by
    ``directory_user_create``), with their name and e-mail as the provider
    gives them now; returns the roles it has now."""
    roles = mapped_roles(identity.groups)
    with transaction.atomic():
        changed = [field for field in ("email", "first_name", "last_name")
                   if getattr(identity, field) and getattr(user, field) != getattr(identity, field)[:150]]
        for field in changed:
            setattr(user, field, getattr(identity, field)[:150])
        if changed:
            user.save(update_fields=changed)
        DirectoryIdentity.objects.update_or_create(
            user=user,
            defaults={"source": identity.source, "issuer": identity.issuer, "subject": identity.subject,
                      "groups": sorted(set(identity.groups)), "last_login_at": timezone.now()},
        )
        before = set(user.groups.filter(name__in=ROLE_PERMISSIONS).values_list("name", flat=True))
        if before != roles:
            ensure_roles()
            user.groups.remove(*Group.objects.filter(name__in=before - roles))
            user.groups.add(*Group.objects.filter(name__in=roles - before))
            audit_record(action="identity.roles_changed", actor=user, object_type="user", object_id=user.pk,
                         detail={"source": identity.source, "issuer": identity.issuer, "subject": identity.subject,
                                 "username": identity.username, "groups": sorted(set(identity.groups)),
                                 "before": sorted(before), "after": sorted(roles)})
    return roles


def role_mapping_save(*, mapping: RoleMapping, by) -> RoleMapping:
    """Saves a mapping (made or changed in the admin), audited: it grants roles."""
    with transaction.atomic():
        created = mapping.pk is None
        mapping.save()
        audit_record(action="role_mapping.created" if created else "role_mapping.changed", actor=by,
                     object_type="role_mapping", object_id=mapping.pk,
                     detail={"directory_group": mapping.directory_group, "role": mapping.role,
                             "clusters": mapping.clusters, "groups": mapping.group_pattern,
                             "topics": mapping.topic_pattern})
    return mapping


def role_mapping_delete(*, mapping: RoleMapping, by) -> None:
    with transaction.atomic():
        audit_record(action="role_mapping.deleted", actor=by, object_type="role_mapping", object_id=mapping.pk,
                     detail={"directory_group": mapping.directory_group, "role": mapping.role})
        mapping.delete()
