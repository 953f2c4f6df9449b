"""Writes of webhook deliveries: each attempt's outcome on its ``Notification``
row (the rows themselves are created with the poll or job they report)."""

from __future__ import annotations

from django.utils import timezone

from groups.models import Notification


def notification_record_attempt(*, notification_id: int, attempts: int, error: str = "", final: bool = False) -> None:
    """One delivery attempt: sent (no ``error``), failed for good (``final``), or to be retried."""
    if not error:
        status, fields = Notification.Status.SENT, {"sent_at": timezone.now()}
    else:
        status, fields = (Notification.Status.FAILED if final else Notification.Status.PENDING), {}
    Notification.objects.filter(id=notification_id).update(attempts=attempts, last_error=error[:1000],
                                                          status=status, **fields)
