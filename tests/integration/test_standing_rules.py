"""Standing repair rules (issue 33, item 5): partitions nobody announced to
Gapwatch (Terraform, Strimzi, ``kafka-topics --alter``) are repaired by a
rule an operator wrote, within its maximum, audited as the rule's.

The first test runs the whole way on the real broker, a real librdkafka
group picking the partition up, the real poller and a real Spark backfill;
the others drive the service on stored findings (real PostgreSQL)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from groups.models import AuditEvent, Finding, RemediationJob, RepairRule, RuleRepair
from groups.services.remediation import job_request
from groups.services.standing_rules import rule_save, standing_rules_apply
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role
from tests.harness.backfills import parquet_rows, run_job
from tests.harness.kafka_clients import GroupConsumer, wait_until
from tests.harness.scenarios import K, findings, poll, produce_one_each, start_consuming_group


def _rule(cluster, by, **fields) -> RepairRule:
    values = {"name": "orders", "topic_pattern": "orders*", "group_pattern": "*", "sink": "parquet",
              "max_records": 1000, **fields}
    return rule_save(rule=RepairRule(cluster=cluster, **values), by=by)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_an_unannounced_expansion_is_repaired_by_the_rule_and_nothing_is_left_unread(
    broker, cluster, unique, approver, backfill_settings, enqueued,
):
    topic, group_id = f"ruled-{unique}", f"latest-{unique}"
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    rule = _rule(cluster, approver, name=f"ruled-{unique}", topic_pattern=f"ruled-{unique}",
                 group_pattern="latest-*", max_records=10_000)

    broker.raise_partitions(topic, 3)  # as kafka-topics --alter would: Gapwatch was not asked
    broker.produce(topic, 2, K)
    poll(cluster)
    assert findings(topic, group_id)[2].state == "pending"
    assert not enqueued, "nothing is queued before the bound is known"

    consumer.close()  # the group's clients pick the partition up (a restart) and start at the end
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: produce_one_each(broker, topic, [2]) and consumer.count(2) > 0, interval=0.5,
                   what="the group to read the new partition")
        wait_until(lambda: poll(cluster) and enqueued, interval=0.5, what="the rule to queue its backfill")
        read = set(consumer.offsets(2))
    finally:
        consumer.close()

    (job_id,) = enqueued
    job = RemediationJob.objects.get(id=job_id)
    assert (job.kind, job.status, job.params["sink"], job.params["rule"]) == ("backfill", "approved", "parquet",
                                                                              rule.id)
    assert job.requested_by is None and job.approved_by is None  # approved by the rule, in advance
    finding = Finding.objects.get(job_findings__job=job)
    assert finding.state == "gap" and finding.first_commit is not None and finding.missed_definite_if_latest == K
    job = run_job(job_id)
    assert job.status == "succeeded", job.error

    finding.refresh_from_db()
    assert finding.resolution == "repaired" and finding.resolved_by_job_id == job.id, finding.closed_reason
    replayed = {offset for (t, partition, offset, *_rest) in parquet_rows(job.result["sink"]["output"])
                if partition == 2}
    assert replayed == set(range(0, finding.first_commit))  # exactly the sound range, no more
    end = max(read) + 1
    assert set(range(0, end)) <= replayed | read, "an offset neither read nor replayed"
    repair = RuleRepair.objects.get(finding=finding)
    assert (repair.rule_id, repair.job_id, repair.refused) == (rule.id, job.id, "")
    requested = AuditEvent.objects.get(action="job.requested", object_id=job.id)
    assert requested.actor is None and requested.detail["via"] == f"standing-rule ruled-{unique}"
    assert job.params["source"] == f"standing-rule ruled-{unique}"


@pytest.fixture
def stored(db, approver):
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders.eu"), 2, (0, 1, 2, 3))
    group = make_group(cluster, "<script>alert(1)</script>")
    return cluster, generation, group


def test_a_rule_acts_once_on_each_decided_finding_it_covers(stored, approver, enqueued):
    cluster, generation, group = stored
    decided = make_finding(group, generation, 2)  # gap, first commit 60, sound range [0, 40)
    make_finding(group, generation, 3, state="pending", first_commit=None, committed_offset=None,
                 backfill_end=None)
    other = make_group(cluster, "shipping")
    make_finding(other, generation, 2)
    _rule(cluster, approver, group_pattern="<script>*")

    (job_id,) = standing_rules_apply(cluster_id=cluster.id)
    assert enqueued == [job_id]
    job = RemediationJob.objects.get(id=job_id)
    assert [f.id for f in job.findings.all()] == [decided.id]
    assert [(p["start"], p["end"]) for p in job.plan] == [(0, 40)]
    assert standing_rules_apply(cluster_id=cluster.id) == [], "acted on once"
    assert RuleRepair.objects.count() == 1


def test_past_its_maximum_a_rule_waits_for_the_count_then_leaves_the_finding_to_a_person(
    stored, approver, enqueued,
):
    cluster, generation, group = stored
    finding = make_finding(group, generation, 2)  # 40 offsets
    _rule(cluster, approver, max_records=30)

    assert standing_rules_apply(cluster_id=cluster.id) == [] and not RuleRepair.objects.exists(), \
        "40 offsets may be fewer records: it waits for the count"
    Finding.objects.filter(id=finding.id).update(records_start=0, records_end=40, records_read_committed=25,
                                                 records_read_uncommitted=40)
    (job_id,) = standing_rules_apply(cluster_id=cluster.id)  # 25 records fit
    assert RemediationJob.objects.get(id=job_id).findings.get() == finding

    second = make_finding(group, generation, 3, records_start=0, records_end=40, records_read_committed=31,
                          records_read_uncommitted=40)
    assert standing_rules_apply(cluster_id=cluster.id) == []
    left = RuleRepair.objects.get(finding=second)
    assert left.job is None and left.refused == ("31 records exceed the 30 approved in advance (standing-rule "
                                                 "orders): left for a person to approve")
    audited = AuditEvent.objects.get(action="backfill.left_for_a_person", object_id=second.id)
    assert (audited.detail["via"], audited.detail["records"]) == ("standing-rule orders", 31)
    assert standing_rules_apply(cluster_id=cluster.id) == [] and RuleRepair.objects.count() == 2


def test_a_persons_job_a_disabled_rule_and_another_cluster_are_left_alone(stored, approver, enqueued):
    cluster, generation, group = stored
    mine = make_finding(group, generation, 2)
    job_request(user=approver, finding_ids=[mine.id], kind="backfill", params={"sink": "parquet"})
    elsewhere = make_cluster("stage")
    make_finding(make_group(elsewhere, "g"), make_generation(make_topic(elsewhere, "orders.eu"), 2, (0, 1, 2)), 2)
    _rule(cluster, approver)
    _rule(elsewhere, approver, enabled=False)

    assert standing_rules_apply(cluster_id=cluster.id) == []
    assert standing_rules_apply(cluster_id=elsewhere.id) == []
    assert not RuleRepair.objects.exists()
    assert RemediationJob.objects.count() == 1


def test_only_a_manager_writes_a_rule_and_a_bad_one_writes_nothing(stored, approver):
    cluster, _, _ = stored
    viewer = user_with_role("viewer-1", "viewer")
    with pytest.raises(PermissionDenied):
        _rule(cluster, viewer)
    with pytest.raises(ValidationError) as refused:
        _rule(cluster, approver, sink="handler", handler="os.system")
    assert "BACKFILL_HANDLERS" in str(refused.value)
    with pytest.raises(ValidationError):
        _rule(cluster, approver, sink="kafka", replay_topic="__consumer_offsets")
    assert not RepairRule.objects.exists() and not AuditEvent.objects.filter(object_type="repair_rule").exists()


def test_the_admin_writes_rules_through_the_audited_service_and_shows_form_errors(stored, admin_user):
    cluster, _, _ = stored
    client = Client()
    client.force_login(admin_user)
    form = {"cluster": cluster.id, "name": "all", "topic_pattern": "orders*", "group_pattern": "<script>*",
            "action": "protect", "sink": "handler", "replay_topic": "", "handler": "nope", "max_records": "100",
            "enabled": "on"}
    page = client.post("/admin/groups/repairrule/add/", form)
    assert page.status_code == 200 and "BACKFILL_HANDLERS" in page.content.decode()
    assert not RepairRule.objects.exists()

    assert client.post("/admin/groups/repairrule/add/", {**form, "sink": "parquet"}).status_code == 302
    rule = RepairRule.objects.get()
    assert (rule.created_by, rule.group_pattern, rule.action) == (admin_user, "<script>*", "protect")
    created = AuditEvent.objects.get(action="repair_rule.created")
    assert created.detail["max_records"] == 100
    listing = client.get("/admin/groups/repairrule/").content.decode()
    assert "&lt;script&gt;*" in listing and "<script>*" not in listing
    deleted = client.post("/admin/groups/repairrule/", {"action": "delete_selected", "post": "yes",
                                                        "_selected_action": [rule.id]})
    assert deleted.status_code == 302 and not RepairRule.objects.exists()
    assert AuditEvent.objects.get(action="repair_rule.deleted").detail["name"] == "all"
