"""One poll of one cluster: observe with the adapter, let the services
write, then run the poll's follow-ups. Used by the Celery task and by
`manage.py poll_now`."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.utils import timezone

from groups.domain.snapshot import Snapshot
from groups.models import Cluster
from groups.services.polls import PollSummary, cluster_record_failure, poll_record_success
from groups.services.resets import reset_auto_repair
from tasks.kafka import KafkaAdapter, KafkaUnavailable
from tasks.notifications import send_notification

log = logging.getLogger(__name__)


def poll_cluster(*, cluster_id: int) -> PollSummary:
    cluster = Cluster.objects.get(id=cluster_id)
    adapter = KafkaAdapter(
        cluster.client_config(), timeout=settings.KAFKA_TIMEOUT_SECONDS, max_in_flight=settings.KAFKA_MAX_IN_FLIGHT
    )
    started = time.monotonic()
    try:
        snapshot = adapter.snapshot(cluster=cluster.name, now=timezone.now())
    except KafkaUnavailable as error:
        return cluster_record_failure(
            cluster_id=cluster.id, error=str(error), now=timezone.now(), kafka_seconds=time.monotonic() - started
        )
    summary = poll_record_success(
        cluster_id=cluster.id, snapshot=snapshot, now=snapshot.taken_at, kafka_seconds=time.monotonic() - started
    )
    poll_follow_up(summary=summary, snapshot=snapshot)
    return summary


def poll_follow_up(*, summary: PollSummary, snapshot: Snapshot) -> None:
    """What a committed poll starts, in this order:

    1. auto-repair: opt-in groups that are Empty in this snapshot get their new
       partitions reset at once (before their consumers return);
    2. webhooks: one task per notification the poll recorded.

    Neither can undo the poll: a failure here is logged and the poll stands.
    """
    if summary.new_finding_ids:
        try:
            reset_auto_repair(finding_ids=summary.new_finding_ids, snapshot=snapshot)
        except Exception:
            log.exception("auto-repair after the poll of %s failed", summary.cluster)
    for notification_id in summary.notification_ids:
        send_notification.delay(notification_id)
