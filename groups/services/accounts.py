"""Writes of login accounts outside the admin: the local administrator that
``make up`` creates (``manage.py ensure_admin``)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction


def admin_ensure(*, username: str, password: str) -> bool:
    """Create the superuser ``username`` with ``password``, or give an existing
    one that password and the staff and superuser flags. Returns whether it was created."""
    with transaction.atomic():
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created or not user.check_password(password):
            user.is_staff = user.is_superuser = True
            user.set_password(password)
            user.save()
    return created
