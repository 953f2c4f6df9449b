"""The poller as it runs in production: Celery tasks on a real worker,
the Redis lock, webhooks, and the poll_now command."""

from __future__ import annotations

import json
import threading

import pytest
import redis
from django.conf import settings
from django.core.management import call_command

from groups.models import Cluster, Finding, Notification
from tasks.celery_tasks import poll_all_clusters, poll_cluster_task, poll_lock_key, watch_cluster_task
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import wait_until
from tests.harness.scenarios import poll, start_consuming_group
from tests.harness.webhooks import WebhookReceiver


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on loopback
    receiver = WebhookReceiver()
    yield receiver
    receiver.close()


def test_a_watcher_tick_waits_a_step_for_the_lock_then_skips(transactional_db, kafka_bootstrap):
    """A tick finding the lock held waits one observation step (a poll or a
    tick ending on time releases it by then), and skips only after that."""
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = client.lock(poll_lock_key(cluster.id), timeout=30, thread_local=False)  # released by a timer thread
    step = settings.WATCH_INTERVAL_SECONDS / settings.WATCH_OBSERVATIONS_PER_TICK
    assert lock.acquire(blocking=False)
    try:
        assert watch_cluster_task.apply(args=(cluster.id,)).get() == {
            "cluster_id": cluster.id, "skipped": "a poll of this cluster is running"}
        releaser = threading.Timer(step / 3, lock.release)
        releaser.start()
        tick = watch_cluster_task.apply(args=(cluster.id,)).get()
        releaser.join()
    finally:
        if lock.owned():
            lock.release()
    assert tick["ok"] is True and "skipped" not in tick, "the lock freed within the step: the tick ran"


def test_it_skips_a_poll_while_another_poll_of_the_cluster_holds_the_lock(transactional_db, kafka_bootstrap):
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = client.lock(poll_lock_key(cluster.id), timeout=30)
    assert lock.acquire(blocking=False)
    try:
        result = poll_cluster_task.apply(args=(cluster.id,)).get()
        assert result == {"cluster_id": cluster.id, "skipped": "a poll of this cluster is already running"}
        cluster.refresh_from_db()
        assert (cluster.polls_total, cluster.skipped_polls_total) == (0, 1), "skipped, and counted as skipped"
    finally:
        lock.release()
    result = poll_cluster_task.apply(args=(cluster.id,)).get()
    assert result["ok"] is True
    cluster.refresh_from_db()
    assert (cluster.polls_total, cluster.status, cluster.skipped_polls_total) == (1, "ok", 1)


def test_a_full_poll_longer_than_the_interval_is_counted_slow_and_a_watcher_tick_never(
        transactional_db, kafka_bootstrap, settings):
    """The rule, on real polls: a full poll taking longer than
    POLL_INTERVAL_SECONDS is slow, a targeted one (the watcher's) never. With
    an hour's interval no real poll is slow; with 0 s every one takes longer."""
    settings.POLL_INTERVAL_SECONDS = 3600
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    poll_cluster_task.apply(args=(cluster.id,)).get()
    cluster.refresh_from_db()
    assert (cluster.polls_total, cluster.slow_polls_total) == (1, 0)
    settings.POLL_INTERVAL_SECONDS = 0
    poll_cluster_task.apply(args=(cluster.id,)).get()
    poll_cluster(cluster_id=cluster.id, topics={"__consumer_offsets"}, groups=())
    cluster.refresh_from_db()
    assert (cluster.polls_total, cluster.slow_polls_total) == (2, 1)


def test_beat_task_polls_every_enabled_cluster_on_a_real_worker(celery_worker_thread, kafka_bootstrap):
    enabled = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    disabled = Cluster.objects.create(name="off", bootstrap_servers=kafka_bootstrap, enabled=False)
    poll_all_clusters.delay()
    wait_until(lambda: Cluster.objects.get(id=enabled.id).polls_total >= 1, timeout=60, what="worker poll")
    assert Cluster.objects.get(id=disabled.id).polls_total == 0
    assert settings.CELERY_BEAT_SCHEDULE["poll-all-clusters"]["schedule"] == float(settings.POLL_INTERVAL_SECONDS)


def test_webhooks_announce_new_findings_and_failed_deliveries_are_retried_then_marked(
    celery_worker_thread, broker, kafka_bootstrap, unique, receiver, settings
):
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap, webhook_url=receiver.url)
    topic, group_id = f"hook-{unique}", f"<script>alert('{unique}')</script>"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    try:
        broker.raise_partitions(topic, 3)
        poll(cluster)
    finally:
        consumer.close()
    wait_until(lambda: any(p["topic"] == topic for p in receiver.received), timeout=30, what="webhook delivery")
    payload = next(p for p in receiver.received if p["topic"] == topic)
    assert (payload["event"], payload["group"], payload["group_type"], payload["partition"], payload["state"]) == (
        "finding.created", group_id, "classic", 2, "pending"
    )
    finding = Finding.objects.get(topic__name=topic)
    assert Notification.objects.get(finding=finding).status == "sent"

    # A receiver that keeps failing: retried, then marked failed; polls go on.
    failing = WebhookReceiver(fail=True)
    try:
        note = Notification.objects.create(cluster=cluster, url=failing.url, event="finding.gap", payload={"x": 1})
        from tasks.celery_tasks import send_notification

        send_notification.delay(note.id)
        wait_until(lambda: Notification.objects.get(id=note.id).status == "failed", timeout=30,
                   what="delivery marked failed")
        note.refresh_from_db()
        assert note.attempts == 2 and "500" in note.last_error
    finally:
        failing.close()


def test_poll_now_prints_json_with_duration_counts_and_new_findings(transactional_db, kafka_bootstrap, capsys):
    Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    call_command("poll_now", "--cluster", "local", "--json")
    [summary] = json.loads(capsys.readouterr().out)
    assert summary["ok"] is True and summary["cluster"] == "local"
    assert summary["duration_seconds"] >= summary["kafka_seconds"] > 0
    assert summary["topics"] >= 1 and summary["partitions"] >= summary["topics"]
    assert summary["new_findings"] == []  # a first poll only records generations


def test_poll_now_names_an_unknown_cluster(transactional_db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        call_command("poll_now", "--cluster", "nope")


def admin_threads() -> set[int]:
    """Ids of the live network threads of Kafka's Java Admin clients in this
    process's JVM (one per client; their names are all the same)."""
    from adapters.kafka.jvm import java_gateway

    threads = java_gateway().jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
    return {int(t.getId()) for t in threads if str(t.getName()).startswith("kafka-admin-client-thread")}


def test_a_dropped_clusters_client_closes_its_java_admin_once_nobody_holds_it(transactional_db, kafka_bootstrap):
    """The poll keeps one client per cluster and worker; a failed request (or a
    change of the cluster's settings) drops it. Dropped is not closed: Kafka's
    Java Admin keeps its network thread, reconnecting to the cluster, until
    ``close``, and an outage dropped one a watcher tick. Closed under a holder
    (another thread of a threads-pool worker), it would abort that holder's
    requests: so it is closed when the last holder lets go."""
    from tasks.polling import cluster_adapter, forget_adapter

    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    others = admin_threads()  # the Java Admins of other tests' clients in this process
    with cluster_adapter(cluster) as kept:
        assert poll_cluster(cluster_id=cluster.id).ok  # topic ids and group reads go through the Java Admin
        with cluster_adapter(cluster) as again:
            assert again is kept  # kept between polls
        ours = admin_threads() - others
        assert ours, "the poll made a Java Admin"

        forget_adapter(cluster.id)  # another holder's request failed
        kept.finalized_features()  # still ours to use, on the same Java Admin
        assert admin_threads() - others == ours, "the held client's Java Admin was closed under its holder"
        with cluster_adapter(cluster) as fresh:
            assert fresh is not kept  # the next holder gets a new client
    wait_until(lambda: not admin_threads() & ours, timeout=10, what="the dropped client's Admin to be closed")

    others = admin_threads()
    assert poll_cluster(cluster_id=cluster.id).ok
    ours = admin_threads() - others
    assert ours, "the next poll made a new Java Admin"
    cluster.bootstrap_servers = f"localhost:{kafka_bootstrap.rsplit(':', 1)[1]}"  # its settings change
    cluster.save()
    assert poll_cluster(cluster_id=cluster.id).ok
    wait_until(lambda: not admin_threads() & ours, timeout=10, what="the old settings' Admin to be closed")


def test_a_client_nobody_used_for_a_while_is_closed_and_one_in_use_is_kept(
    transactional_db, kafka_bootstrap, settings
):
    """A worker keeps a client of every cluster it polled; one of a cluster
    that is no longer polled (deleted, disabled) is closed after
    KAFKA_CLIENT_IDLE_SECONDS, at the next use of another cluster's."""
    from tasks.polling import cluster_adapter

    settings.KAFKA_CLIENT_IDLE_SECONDS = 3
    gone = Cluster.objects.create(name="gone", bootstrap_servers=kafka_bootstrap)
    kept = Cluster.objects.create(name="kept", bootstrap_servers=kafka_bootstrap)
    others = admin_threads()
    assert poll_cluster(cluster_id=gone.id).ok
    ours = admin_threads() - others
    assert ours, "the poll made a Java Admin"
    with cluster_adapter(kept) as first:
        pass
    gone.delete()

    def polled_and_closed() -> bool:
        assert poll_cluster(cluster_id=kept.id).ok
        return not admin_threads() & ours
    wait_until(polled_and_closed, timeout=30, what="the unused cluster's client to be closed")
    with cluster_adapter(kept) as again:
        assert again is first, "a client used within the idle time is kept"
