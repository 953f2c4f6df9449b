"""Webhook delivery: one Celery task per notification a poll recorded."""

from __future__ import annotations

import json
import logging
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from groups.domain.webhooks import address_forbidden, webhook_url_problem
from groups.models import Notification

log = logging.getLogger(__name__)


def _destination_problem(url: str) -> str | None:
    """The URL's rule (groups.domain.webhooks), then every address its host
    resolves to now: a public name may point at loopback or a private network."""
    allow_private = settings.WEBHOOK_ALLOW_PRIVATE
    problem = webhook_url_problem(url, allow_private=allow_private)
    if problem or allow_private:
        return problem
    host = urlsplit(url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError as error:
        return None if isinstance(error, socket.gaierror) else f"cannot resolve {host}: {error}"
    forbidden = sorted(a for a in addresses if address_forbidden(a))
    return f"{host} resolves to {', '.join(forbidden)}: webhooks go to public addresses only" if forbidden else None


@shared_task(name="gapwatch.send_notification", bind=True, max_retries=None, ignore_result=True)
def send_notification(self, notification_id: int) -> None:
    """POST one webhook; retried with exponential backoff up to WEBHOOK_MAX_ATTEMPTS.
    Never blocks a poll: it runs on its own after the poll committed."""
    notification = Notification.objects.filter(id=notification_id, status=Notification.Status.PENDING).first()
    if notification is None:
        return
    attempts = notification.attempts + 1
    refused = _destination_problem(notification.url)
    if refused:
        # Final at once: retrying cannot make the destination acceptable.
        Notification.objects.filter(id=notification_id).update(
            attempts=attempts, last_error=refused[:1000], status=Notification.Status.FAILED)
        log.warning("webhook %s not sent: %s", notification_id, refused)
        return
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
