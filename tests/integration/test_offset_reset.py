"""Offset resets end to end, on the real broker with real consumers, through
the real Celery worker and the real database (no mocks).

The scenario: a `latest` group reads partitions 0 and 1 of a topic; the topic
grows a partition 2; K messages are written to it; the group picks it up at
its end, so it misses those K. A reset of partition 2 to earliest, done while
the group is Empty, closes the gap: the consumer reads exactly the K missed
messages and nothing again from partitions 0 and 1.
"""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from django.contrib.auth.models import Permission, User
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from groups.models import AuditEvent, Cluster, ConsumerGroup, RemediationJob
from groups.domain.planning import ResetTarget, plan_reset
from groups.services.previews import positions_of
from groups.services.remediation import job_approve, job_request, job_transition
from groups.services.resets import reset_job_create
from tasks import offset_reset
from tasks.celery_tasks import poll_cluster_task, run_remediation_job
from adapters.kafka.adapter import ClusterConfig, GroupNotEmpty, KafkaAdapter
from tests.harness.kafka_clients import GroupConsumer, wait_until
from tests.harness.scenarios import committed, findings, job_of, poll, start_consuming_group

K = 25  # messages written to the new partition before the group picks it up


def a_passed_moment_after_every_record() -> int:
    """Epoch milliseconds later than every record written so far (their
    producer's clock read at most now; 2 ms, so that a date-time read back as a
    float lands after them too), and passed, so that every record written from
    here on is at or after it."""
    moment_ms = int(time.time() * 1000) + 2
    wait_until(lambda: time.time() * 1000 >= moment_ms, interval=0.001, what="the clock to pass the moment")
    return moment_ms


def group_missing_k(broker, cluster, topic: str, group_id: str) -> GroupConsumer:
    """A `latest` group that read partitions 0 and 1, then picked the new
    partition 2 up at its end, after K messages were written to it: it has
    missed those K. Returns its running consumer."""
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    assert findings(topic, group_id)[2].state == "pending"
    consumer.close()
    # With no commit on partition 2, `latest` starts it at K: the K messages are skipped.
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: consumer.assigned == {0, 1, 2}, what="the new partition assigned")
        wait_until(lambda: poll(cluster) and findings(topic, group_id)[2].owner_client_id, what="the owner polled")
    except BaseException:
        consumer.close()
        raise
    return consumer


def assert_reads_exactly_the_missed(broker, topic: str, group_id: str) -> None:
    """Start the group's consumer again: it must read offsets 0..K-1 of
    partition 2, once each, and nothing of partitions 0 and 1 it had read.
    Instead of waiting for quiet, one marker is written to each partition
    once the missed messages arrived: a partition delivers in order, so when
    every marker is in, anything else the group would read is in too."""
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: consumer.count(2) >= K, what="the missed messages to arrive")
        for partition in (0, 1, 2):
            broker.produce(topic, partition, 1, prefix="marker")
        wait_until(lambda: all(consumer.count(p) for p in (0, 1)) and consumer.count(2) > K,
                   what="the markers to arrive")
        assert consumer.received[2] == list(range(K + 1)), "the K missed, once each, then the marker"
        assert (consumer.count(0), consumer.count(1)) == (1, 1), "only the markers of what it had read"
    finally:
        consumer.close()


# -- the scenarios --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_resets_a_stopped_group_and_its_consumer_reads_exactly_the_missed_messages(
    broker, cluster, unique, group_ids, approver, celery_worker_thread, client
):
    topic, group_id = f"reset-{unique}", f"latest-{unique}"
    group_ids.append(group_id)
    consumer = group_missing_k(broker, cluster, topic, group_id)
    consumer.close()
    old = committed(broker, group_id, topic)
    assert old[2] is None and old[0] and old[1]

    finding = findings(topic, group_id)[2]
    started = time.monotonic()
    job = job_request(user=approver, finding_ids=[finding.id], kind="reset", params={"target": "earliest"})
    [planned] = job.plan  # stored on the job before anything is committed
    assert {key: planned[key] for key in ("partition", "log_start", "high_watermark", "current", "planned")} == {
        "partition": 2, "log_start": 0, "high_watermark": K, "current": None, "planned": 0
    }
    wait_until(lambda: job_of(job.id).status in RemediationJob.FINISHED, timeout=30, interval=0.05,
               what="the worker to run the job")
    wall_seconds = time.monotonic() - started
    job = job_of(job.id)
    assert job.status == "succeeded", job.error
    assert job.result["partitions"] == [{"topic": topic, "partition": 2, "before": None, "planned": 0, "after": 0}]
    assert job.result["verified"] is True
    assert committed(broker, group_id, topic) == {0: old[0], 1: old[1], 2: 0}
    print(f"\napproval -> verified reset: {job.result['approval_to_verified_seconds']:.3f}s on the server "
          f"(approved_at to read-back), {wall_seconds:.3f}s seen by the test through the Celery worker")

    audit = AuditEvent.objects.get(action="offsets.reset", object_id=str(job.id))
    assert audit.system and audit.detail["partitions"] == job.result["partitions"]
    assert audit.detail["via"] == "dashboard" and audit.detail["verified"] is True
    assert list(AuditEvent.objects.filter(object_type="job", object_id=str(job.id)).order_by("id")
                .values_list("action", flat=True)) == [
        "job.requested", "job.approved", "job.queued", "job.running", "offsets.reset", "job.succeeded"
    ]

    # Idempotent: the same job run again changes nothing and reports the same result.
    audits = AuditEvent.objects.count()
    assert run_remediation_job.apply(args=(job.id,)).get() == "succeeded"
    again = job_of(job.id)
    assert (again.status, again.result, again.finished_at) == ("succeeded", job.result, job.finished_at)
    assert AuditEvent.objects.count() == audits
    assert committed(broker, group_id, topic)[2] == 0

    # The export, like Kafka's --export.
    client.force_login(approver)
    response = client.get(f"/jobs/{job.id}/export.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert list(csv.reader(io.StringIO(response.content.decode()))) == [
        ["group", "topic", "partition", "before", "planned", "after"], [group_id, topic, "2", "", "0", "0"],
    ]

    assert_reads_exactly_the_missed(broker, topic, group_id)


@pytest.mark.django_db(transaction=True)
def test_a_job_waits_while_the_group_has_members_and_completes_on_a_later_poll(
    broker, cluster, unique, group_ids, approver, celery_worker_thread
):
    topic, group_id = f"busy-{unique}", f"busy-{unique}"
    group_ids.append(group_id)
    consumer = group_missing_k(broker, cluster, topic, group_id)
    try:
        before = committed(broker, group_id, topic)
        job = job_request(user=approver, finding_ids=[findings(topic, group_id)[2].id], kind="reset",
                          params={"target": "earliest"})
        wait_until(lambda: job_of(job.id).status == "waiting", timeout=30, what="the job to wait")
        assert job_of(job.id).status_reason == (
            f"group {group_id} has 1 active member; stop its consumers or choose a Spark backfill"
        )
        # Each successful poll tries it again; while the consumer runs, it keeps waiting, offsets untouched.
        assert poll_cluster_task.apply(args=(cluster.id,)).get()["ok"]
        wait_until(lambda: job_of(job.id).result.get("checks", 0) >= 2, timeout=30, what="a retry after the poll")
        assert job_of(job.id).status == "waiting"
        assert committed(broker, group_id, topic) == before
        assert not AuditEvent.objects.filter(action="offsets.reset").exists()
    finally:
        consumer.close()

    def completed_after_a_poll() -> bool:
        poll_cluster_task.apply(args=(cluster.id,)).get()
        return job_of(job.id).status in RemediationJob.FINISHED

    wait_until(completed_after_a_poll, timeout=60, interval=1, what="the job to complete after the consumer stopped")
    job = job_of(job.id)
    assert job.status == "succeeded", job.error
    assert job.result["waiting_since"] and job.result["checks"] >= 2
    assert committed(broker, group_id, topic) == {**before, 2: 0}
    assert_reads_exactly_the_missed(broker, topic, group_id)


@pytest.mark.django_db(transaction=True)
def test_auto_repair_resets_new_partitions_of_an_empty_group_before_its_consumers_return(
    broker, cluster, unique, group_ids, celery_worker_thread
):
    topic, group_id = f"auto-{unique}", f"auto-{unique}"
    group_ids.append(group_id)
    broker.create_topic(topic, 2)
    start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest").close()
    ConsumerGroup.objects.filter(group_id=group_id).update(auto_repair=True)
    before = committed(broker, group_id, topic, (0, 1))

    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)  # finds partition 2 while the group is Empty

    job = RemediationJob.objects.get(group__group_id=group_id)
    wait_until(lambda: job_of(job.id).status in RemediationJob.FINISHED, timeout=30, what="the auto-repair job")
    job = job_of(job.id)
    assert job.status == "succeeded", job.error
    assert (job.requested_by, job.approved_by, job.params["source"]) == (None, None, "auto-repair")
    assert list(job.findings.values_list("partition", flat=True)) == [2]
    assert committed(broker, group_id, topic) == {**before, 2: 0}
    requested = AuditEvent.objects.get(action="job.requested", object_id=str(job.id))
    assert requested.system and requested.actor is None and requested.detail["via"] == "auto-repair"
    assert AuditEvent.objects.get(action="offsets.reset", object_id=str(job.id)).system

    # The consumer comes back: everything on the new partition, nothing twice.
    assert_reads_exactly_the_missed(broker, topic, group_id)


@pytest.mark.django_db(transaction=True)
def test_auto_repair_is_off_by_default_and_leaves_active_groups_alone(
    broker, cluster, unique, group_ids
):
    topic, group_id = f"noauto-{unique}", f"noauto-{unique}"
    quiet_group = f"quiet-{unique}"
    group_ids.extend([group_id, quiet_group])
    broker.create_topic(topic, 2)
    # One group opted in but is running; another is Empty but never opted in.
    running = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    start_consuming_group(broker, cluster, topic, quiet_group, offset_reset="latest").close()
    try:
        ConsumerGroup.objects.filter(group_id=group_id).update(auto_repair=True)
        broker.raise_partitions(topic, 3)
        broker.produce(topic, 2, 3)
        poll(cluster)
        assert sorted(findings(topic, group_id)) == sorted(findings(topic, quiet_group)) == [2]
        assert not RemediationJob.objects.exists()
        assert committed(broker, quiet_group, topic)[2] is None
    finally:
        running.close()


@pytest.mark.django_db(transaction=True)
def test_it_fails_instead_of_overwriting_offsets_someone_moved_since_the_plan(
    broker, cluster, unique, group_ids, approver, celery_worker_thread, settings
):
    settings.FOUR_EYES = True
    topic, group_id = f"moved-{unique}", f"moved-{unique}"
    group_ids.append(group_id)
    group_missing_k(broker, cluster, topic, group_id).close()
    job = job_request(user=approver, finding_ids=[findings(topic, group_id)[2].id], kind="reset",
                      params={"target": "earliest"})
    assert job.status == "requested"
    # Another operator resets partition 2 by hand before this job is approved.
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, 2, 7)])
    broker.admin.alter_consumer_group_offsets([request])[group_id].result(timeout=30)

    second = User.objects.create_user("second-approver", password="not-used-here-2")
    second.user_permissions.add(Permission.objects.get(codename="approve_remediation"))
    job_approve(user=User.objects.get(id=second.id), job_id=job.id)
    wait_until(lambda: job_of(job.id).status in RemediationJob.FINISHED, timeout=30, what="the job to finish")
    job = job_of(job.id)
    assert job.status == "failed"
    assert f"{topic}[2] was no commit when planned, now 7" in job.error
    assert "Nothing was committed" in job.error
    assert committed(broker, group_id, topic)[2] == 7
    assert not AuditEvent.objects.filter(action="offsets.reset").exists()


class _ConsumerJoinsBeforeTheCommit(KafkaAdapter):
    """Our adapter, unchanged, except that the first committed-offset read
    (between the group check and the commit) waits until a real consumer of
    ``topic`` has joined the group: the race the broker's UNKNOWN_MEMBER_ID
    guards against. The consumer is appended to ``joined``, for the test to close."""

    def __init__(self, cluster: Cluster, *, topic: str, joined: list[GroupConsumer]) -> None:
        super().__init__(cluster.cluster_config(), timeout=settings.KAFKA_TIMEOUT_SECONDS)
        self.bootstrap, self.topic, self.joined = cluster.bootstrap_servers, topic, joined

    def committed_offsets(self, *, group_id, partitions):
        if not self.joined:
            consumer = GroupConsumer(self.bootstrap, group_id, self.topic, offset_reset="latest")
            self.joined.append(consumer)
            wait_until(lambda: consumer.assigned, what="the consumer to join")
        return super().committed_offsets(group_id=group_id, partitions=partitions)


@pytest.mark.django_db(transaction=True)
def test_a_commit_refused_because_the_group_became_active_goes_back_to_waiting(broker, cluster, unique, group_ids):
    topic, group_id = f"race-{unique}", f"race-{unique}"
    group_ids.append(group_id)
    group_missing_k(broker, cluster, topic, group_id).close()
    target = ResetTarget("earliest")
    plan = plan_reset(target=target, positions=positions_of([findings(topic, group_id)[2]]))
    job = reset_job_create(cluster=cluster, group=ConsumerGroup.objects.get(group_id=group_id),
                           target=target, plan=plan, source="cli", enqueue=False)
    # What run_remediation_job does before it hands the job to its executor, here given the racing adapter.
    assert job_transition(job_id=job.id, from_statuses=["approved"], to_status="queued")
    joined: list[GroupConsumer] = []
    try:
        status = offset_reset.execute_reset(
            job_id=job.id, adapter_for=lambda c: _ConsumerJoinsBeforeTheCommit(c, topic=topic, joined=joined))
        assert status == "waiting"
        job = job_of(job.id)
        assert job.status_reason.startswith("the broker refused the commit: the group became active")
        assert "UNKNOWN_MEMBER_ID" in job.status_reason
        assert committed(broker, group_id, topic)[2] is None
        assert not AuditEvent.objects.filter(action="offsets.reset").exists()
    finally:
        for consumer in joined:
            consumer.close()
    # The consumer left: the next try succeeds.
    wait_until(lambda: run_remediation_job.apply(args=(job.id,)).get() == "succeeded", timeout=30, interval=1,
               what="the retry to succeed")
    assert committed(broker, group_id, topic)[2] == 0


@pytest.mark.django_db(transaction=True)
def test_a_job_still_waiting_at_its_deadline_fails_with_offsets_untouched(
    broker, cluster, unique, group_ids, settings
):
    settings.RESET_WAIT_DEADLINE_SECONDS = 1
    topic, group_id = f"deadline-{unique}", f"deadline-{unique}"
    group_ids.append(group_id)
    consumer = group_missing_k(broker, cluster, topic, group_id)
    try:
        before = committed(broker, group_id, topic)
        target = ResetTarget("offset", 3)
        plan = plan_reset(target=target, positions=positions_of([findings(topic, group_id)[2]]))
        job = reset_job_create(cluster=cluster, group=ConsumerGroup.objects.get(group_id=group_id),
                               target=target, plan=plan, source="cli", enqueue=False)
        assert run_remediation_job.apply(args=(job.id,)).get() == "waiting"
        # The clock the executor is given has passed the 1 s deadline; nothing waits for the real one.
        later = timezone.now() + timedelta(seconds=2)
        assert offset_reset.execute_reset(job_id=job.id, now=later) == "failed"
    finally:
        consumer.close()
    job = job_of(job.id)
    assert job.status_reason == "gave up after waiting 1s for the group to be Empty"
    assert job.error == (f"deadline passed while waiting: group {group_id} has 1 active member; stop its consumers "
                         f"or choose a Spark backfill; offsets untouched")
    assert committed(broker, group_id, topic) == before
    # A finished job is never picked up again, even with its group Empty now.
    assert run_remediation_job.apply(args=(job.id,)).get() == "failed"
    assert committed(broker, group_id, topic) == before


@pytest.mark.django_db(transaction=True)
def test_a_timestamp_job_from_the_dashboard_is_resolved_and_planned_when_it_runs(
    broker, cluster, unique, group_ids, approver, celery_worker_thread
):
    topic, group_id = f"ts-{unique}", f"ts-{unique}"
    group_ids.append(group_id)
    group_missing_k(broker, cluster, topic, group_id).close()
    cut_ms = a_passed_moment_after_every_record()
    broker.produce(topic, 2, 3, prefix="after")
    job = job_request(user=approver, finding_ids=[findings(topic, group_id)[2].id], kind="reset",
                      params={"target": "timestamp", "value": cut_ms})
    assert job.plan == []  # nothing to show until the broker is asked, at execution
    wait_until(lambda: job_of(job.id).status in RemediationJob.FINISHED, timeout=30, what="the job to finish")
    job = job_of(job.id)
    assert job.status == "succeeded", job.error
    assert [(p["partition"], p["current"], p["planned"]) for p in job.plan] == [(2, None, K)]
    assert committed(broker, group_id, topic)[2] == K


# -- the command line ---------------------------------------------------------


def reset_offsets(*args: str) -> str:
    out = io.StringIO()
    call_command("reset_offsets", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_command_previews_by_default_and_executes_an_audited_job(broker, cluster, unique, group_ids):
    topic, group_id = f"cli-{unique}", f"cli-{unique}"
    group_ids.append(group_id)
    consumer = group_missing_k(broker, cluster, topic, group_id)
    try:
        # Two more records read on partition 0, so that its commit is 2 or more and the shift of -2
        # below stays inside the log (a latest member had read one record there once, committing 1).
        broker.produce(topic, 0, 2)
        wait_until(lambda: (committed(broker, group_id, topic)[0] or 0) >= 2, what="a commit of 2 or more on 0")
    finally:
        consumer.close()
    before = committed(broker, group_id, topic)
    base = ["--cluster", "local", "--group", group_id]

    preview = reset_offsets(*base, "--topic", f"{topic}:2", "--to-earliest")
    assert f"group '{group_id}' on local: Empty, 0 member(s); target earliest" in preview
    [row] = [line.split() for line in preview.splitlines() if line.startswith(f"{topic} ")]
    assert row == [topic, "2", "0", str(K), "-", "0", "0", "0"]  # log start, end, no commit, planned 0
    assert "dry run: nothing committed" in preview
    assert committed(broker, group_id, topic) == before
    assert not RemediationJob.objects.exists()

    # Shift back from the commit on partition 0; -2 is read as a number, not an option.
    shifted = reset_offsets(*base, "--topic", f"{topic}:0", "--shift-by", "-2")
    [row] = [line.split() for line in shifted.splitlines() if line.startswith(f"{topic} ")]
    assert row[4:8] == [str(before[0]), str(before[0] - 2), "2", "0"]  # current, planned, redelivered, skipped

    out = reset_offsets(*base, "--topic", f"{topic}:2", "--to-earliest", "--execute")
    job = RemediationJob.objects.get()
    assert f"job {job.id} succeeded" in out and f"{topic}[2]: - -> 0 (read back)" in out
    assert (job.status, job.requested_by, job.params["source"]) == ("succeeded", None, "cli")
    assert committed(broker, group_id, topic) == {**before, 2: 0}
    requested = AuditEvent.objects.get(action="job.requested", object_id=str(job.id))
    assert requested.system and requested.detail["via"] == "cli"
    assert AuditEvent.objects.get(action="offsets.reset").detail["via"] == "cli"


@pytest.mark.django_db(transaction=True)
def test_the_command_resolves_a_datetime_against_the_broker(broker, cluster, unique, group_ids):
    topic, group_id = f"when-{unique}", f"when-{unique}"
    group_ids.append(group_id)
    group_missing_k(broker, cluster, topic, group_id).close()
    cut = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=a_passed_moment_after_every_record())
    broker.produce(topic, 2, 4, prefix="after")
    out = reset_offsets("--cluster", "local", "--group", group_id, "--topic", f"{topic}:2",
                        "--to-datetime", cut.isoformat(), "--execute")
    job = RemediationJob.objects.get()
    assert job.status == "succeeded", out
    assert job.params["target"] == "timestamp" and job.params["value"] == int(cut.timestamp() * 1000)
    # The first message at or after the cut is the first of the 4 written after it.
    assert job.plan[0]["planned"] == K and job.result["partitions"][0]["after"] == K
    assert committed(broker, group_id, topic)[2] == K


@pytest.mark.django_db(transaction=True)
def test_the_command_refuses_bad_input_and_never_commits_silently(broker, cluster, unique, group_ids):
    topic, group_id = f"bad-{unique}", f"bad-{unique}"
    group_ids.append(group_id)
    group_missing_k(broker, cluster, topic, group_id).close()
    before = committed(broker, group_id, topic)
    base = ["--cluster", "local", "--group", group_id]
    refused = {
        "no cluster named 'nowhere'": ["--cluster", "nowhere", "--group", group_id, "--topic", topic,
                                       "--to-earliest"],
        f"group 'ghost-{unique}' is not known on cluster 'local'": [
            "--cluster", "local", "--group", f"ghost-{unique}", "--topic", topic, "--to-earliest"],
        f"topic 'ghost-{unique}' does not exist": [*base, "--topic", f"ghost-{unique}", "--to-earliest"],
        f"topic 'ghost-{unique}' does not exist ": [*base, "--topic", f"ghost-{unique}:0", "--to-earliest"],
        f"topic '{topic}' has no partition 7 (its partitions are 0 to 2)": [
            *base, "--topic", f"{topic}:2,7", "--to-earliest", "--execute"],
        "offset must not be negative, got -1": [*base, "--topic", topic, "--to-offset", "-1", "--execute"],
        "is in the future": [*base, "--topic", topic, "--to-datetime", "2999-01-01T00:00:00Z", "--execute"],
        "is not an ISO 8601 date-time": [*base, "--topic", topic, "--to-datetime", "yesterday", "--execute"],
        "partitions must be whole numbers": [*base, "--topic", f"{topic}:two", "--to-earliest"],
    }
    for message, args in refused.items():
        with pytest.raises(CommandError) as error:
            reset_offsets(*args)
        assert message.strip() in str(error.value), args
    assert committed(broker, group_id, topic) == before
    assert not RemediationJob.objects.exists()
    assert broker.admin.list_topics(timeout=10).topics.get(f"ghost-{unique}") is None  # never auto-created

    # An offset above the high watermark is clamped, and the preview says so before anything is committed.
    preview = reset_offsets(*base, "--topic", f"{topic}:2", "--to-offset", "999")
    assert f"{topic}[2]: requested 999 is outside [0, {K}] (log start, high watermark): clamped to {K}" in preview
    reset_offsets(*base, "--topic", f"{topic}:2", "--to-offset", "999", "--execute")
    job = RemediationJob.objects.get()
    assert (job.status, job.plan[0]["clamped"], job.result["partitions"][0]["after"]) == ("succeeded", True, K)


@pytest.mark.django_db(transaction=True)
def test_the_command_reports_a_job_left_waiting_for_an_active_group(broker, cluster, unique, group_ids):
    topic, group_id = f"cliwait-{unique}", f"cliwait-{unique}"
    group_ids.append(group_id)
    consumer = group_missing_k(broker, cluster, topic, group_id)
    try:
        before = committed(broker, group_id, topic)
        preview = reset_offsets("--cluster", "local", "--group", group_id, "--topic", f"{topic}:2", "--to-earliest")
        assert f"note: group {group_id} has 1 active member" in preview
        with pytest.raises(CommandError) as error:
            reset_offsets("--cluster", "local", "--group", group_id, "--topic", f"{topic}:2", "--to-earliest",
                          "--execute")
        assert error.value.returncode == 2 and "is waiting: group" in str(error.value)
        assert RemediationJob.objects.get().status == "waiting"
        assert committed(broker, group_id, topic) == before
    finally:
        consumer.close()


# -- the adapter's contract for resets ------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_adapter_reads_and_commits_one_group_and_refuses_an_active_one(
    broker, cluster, unique, group_ids, kafka_bootstrap
):
    topic, group_id = f"adapter-{unique}", f"adapter-{unique}"
    group_ids.append(group_id)
    adapter = KafkaAdapter(ClusterConfig(bootstrap_servers=kafka_bootstrap), timeout=10)
    assert adapter.describe_topic(f"ghost-{unique}") is None
    assert adapter.describe_group(group_id=f"ghost-{unique}").inactive
    consumer = group_missing_k(broker, cluster, topic, group_id)
    try:
        assert adapter.describe_topic(topic).partition_ids == (0, 1, 2)
        status = adapter.describe_group(group_id=group_id)
        assert (status.state, status.member_count, status.inactive) == ("Stable", 1, False)
        with pytest.raises(GroupNotEmpty, match="UNKNOWN_MEMBER_ID"):
            adapter.alter_group_offsets(group_id=group_id, offsets={(topic, 2): 0})
    finally:
        consumer.close()
    assert adapter.committed_offsets(group_id=group_id, partitions=[(topic, 2)]) == {(topic, 2): None}
    adapter.alter_group_offsets(group_id=group_id, offsets={(topic, 2): 5})
    assert adapter.committed_offsets(group_id=group_id, partitions=[(topic, 2)]) == {(topic, 2): 5}
    future_ms = int(time.time() * 1000) + 3_600_000
    assert adapter.offsets_for_times(topic=topic, partitions=[2], timestamp_ms=future_ms) == {2: None}
    assert adapter.offsets_for_times(topic=topic, partitions=[2], timestamp_ms=0) == {2: 0}
    with pytest.raises(ValueError, match="negative"):
        adapter.alter_group_offsets(group_id=group_id, offsets={(topic, 2): -1})


# -- the export -----------------------------------------------------------------


@pytest.mark.django_db
def test_the_export_escapes_hostile_group_ids_and_defuses_formulas(client, approver):
    now = datetime.now(UTC)
    cluster = Cluster.objects.create(name="prod", bootstrap_servers="prod:9092")
    hostile = '=HYPERLINK("http://evil","x"),\n"quoted" <b>🦄'
    group = ConsumerGroup.objects.create(cluster=cluster, group_id=hostile, first_seen_at=now, last_seen_at=now)
    job = RemediationJob.objects.create(
        cluster=cluster, group=group, kind="reset", status="succeeded",
        plan=[{"topic": "-orders", "partition": 1, "current": 40, "planned": 10},
              {"topic": "-orders", "partition": 2, "current": None, "planned": 0}],
        result={"partitions": [{"topic": "-orders", "partition": 1, "before": 40, "planned": 10, "after": 10}]},
    )
    url = f"/jobs/{job.id}/export.csv"
    assert client.get(url).status_code == 302  # login required
    client.force_login(approver)
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="gapwatch-job-{job.id}-reset.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows == [
        ["group", "topic", "partition", "before", "planned", "after"],
        ["'" + hostile, "'-orders", "1", "40", "10", "10"],
        ["'" + hostile, "'-orders", "2", "", "0", ""],
    ]
    assert client.post(url).status_code == 405
    backfill = RemediationJob.objects.create(cluster=cluster, group=group, kind="backfill", status="queued")
    assert client.get(f"/jobs/{backfill.id}/export.csv").status_code == 404
