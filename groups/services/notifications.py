"""Webhook notifications, the one place they are made: which URL a
cluster's events go to (``webhook_url``), the rows (``notifications_create``,
for a poll's findings and a job's outcome alike), each sent by a worker once
the transaction that made it commits; and each delivery attempt's outcome
(``notification_record_attempt``)."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.utils import timezone

from groups.domain.reasons import system_text
from groups.models import Cluster, Finding, Notification
from groups.services import dispatch


def webhook_url(cluster: Cluster) -> str:
    """Where the cluster's events go: its own webhook, else WEBHOOK_URL; empty: nowhere."""
    return cluster.webhook_url or settings.WEBHOOK_URL


def notifications_create(*, cluster: Cluster, events: Iterable[tuple[str, dict, Finding | None]]) -> list[Notification]:
    """One row per (event, payload, finding) to the cluster's webhook, each
    sent after commit (nothing when the cluster has no webhook). A queue that
    fails at the commit is logged, not raised: the rows stay pending."""
    url = webhook_url(cluster)
    if not url:
        return []
    rows = Notification.objects.bulk_create(
        Notification(cluster=cluster, finding=finding, url=url, event=event, payload=payload)
        for event, payload, finding in events
    )
    for row in rows:
        dispatch.task_enqueue_on_commit(dispatch.SEND_NOTIFICATION, row.id)
    return rows


def notification_record_attempt(*, notification_id: int, attempts: int, error: str = "", final: bool = False) -> None:
    """One delivery attempt: sent (no ``error``), failed for good (``final``), or to be retried."""
    if not error:
        status, fields = Notification.Status.SENT, {"sent_at": timezone.now()}
    else:
        status, fields = (Notification.Status.FAILED if final else Notification.Status.PENDING), {}
    Notification.objects.filter(id=notification_id).update(attempts=attempts, last_error=system_text(error),
                                                          status=status, **fields)
