"""The two roles. viewer: reads everything. approver: may request, approve and
dismiss remediations and manage clusters. Assign people to them in the admin."""

from __future__ import annotations

ROLE_PERMISSIONS = {
    "viewer": [],
    "approver": ["approve_remediation", "manage_clusters"],
}


def ensure_roles(*, group_model=None, permission_model=None) -> None:
    """Create the role groups with their permissions; idempotent. Migrations
    pass their historical models."""
    if group_model is None:
        from django.contrib.auth.models import Group as group_model  # noqa: N813
        from django.contrib.auth.models import Permission as permission_model
    for name, codenames in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        if codenames:
            group.permissions.add(
                *permission_model.objects.filter(content_type__app_label="groups", codename__in=codenames)
            )


def has_role(user) -> bool:
    """A superuser, or a member of one of the role groups: anyone else sees nothing."""
    return bool(user.is_superuser or user.groups.filter(name__in=ROLE_PERMISSIONS).exists())
