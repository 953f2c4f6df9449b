"""Writes of login accounts outside the admin: the local administrator that
``make up`` creates (``manage.py ensure_admin``), and a person's own settings."""

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


def person_time_zone_set(*, user, time_zone: str) -> str:
    """Show ``user`` every time in ``time_zone`` (an IANA name, e.g. "Europe/Berlin"), or in the browser's
    own zone for "". A name the server's zone database does not know is a ValidationError naming it."""
    from zoneinfo import available_timezones

    from django.core.exceptions import ValidationError

    from groups.models import PersonSettings

    time_zone = time_zone.strip()
    if time_zone and time_zone not in available_timezones():
        raise ValidationError(f"“{time_zone[:64]}” is not a time zone: pick one from the list, e.g. Europe/Berlin.")
    PersonSettings.objects.update_or_create(user=user, defaults={"time_zone": time_zone})
    return time_zone


def person_color_scheme_set(*, user, color_scheme: str) -> str:
    """Show ``user`` light or dark pages, or as their system is set ("system"). Anything else is a
    ValidationError naming the choices."""
    from django.core.exceptions import ValidationError

    from groups.models import PersonSettings

    if color_scheme not in PersonSettings.ColorScheme.values:
        raise ValidationError(f"“{color_scheme[:20]}” is not a color scheme: choose system, light or dark.")
    PersonSettings.objects.update_or_create(user=user, defaults={"color_scheme": color_scheme})
    return color_scheme
