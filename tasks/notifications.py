"""Webhook delivery: one Celery task per notification a poll recorded."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from groups.models import Notification

log = logging.getLogger(__name__)


@shared_task(name="gapwatch.send_notification", bind=True, max_retries=None, ignore_result=True)
def send_notification(self, notification_id: int) -> None:
    """POST one webhook; retried with exponential backoff up to WEBHOOK_MAX_ATTEMPTS.
    Never blocks a poll: it runs on its own after the poll committed."""
    notification = Notification.objects.filter(id=notification_id, status=Notification.Status.PENDING).first()
    if notification is None:
        return
    attempts = notification.attempts + 1
    request = urllib.request.Request(
        notification.url, data=json.dumps(notification.payload).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "gapwatch"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()
    except (urllib.error.URLError, OSError, ValueError) as error:
        final = attempts >= settings.WEBHOOK_MAX_ATTEMPTS
        Notification.objects.filter(id=notification_id).update(
            attempts=attempts, last_error=str(error)[:1000],
            status=Notification.Status.FAILED if final else Notification.Status.PENDING,
        )
        log.warning("webhook %s attempt %d/%d failed: %s", notification_id, attempts,
                    settings.WEBHOOK_MAX_ATTEMPTS, error)
        if not final:
            raise self.retry(countdown=min(300, 2 ** attempts))
        return
    Notification.objects.filter(id=notification_id).update(
        attempts=attempts, status=Notification.Status.SENT, sent_at=timezone.now(), last_error=""
    )
