"""A verified job closes its findings as repaired, with what it recovered; a
failed or cancelled one leaves them open; both outcomes reach the webhook.
Real PostgreSQL; the executors' own runs are in test_offset_reset.py and
test_backfill.py (and the browser walk in test_browser_lifecycle.py)."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from groups.domain.reasons import TEXT_LIMIT, system_text
from groups.models import AuditEvent, Finding, Notification, RemediationJob
from groups.services import previews, remediation
from groups.services.remediation import job_transition
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic


@pytest.fixture
def two_findings(db):
    cluster = make_cluster("prod", webhook_url="https://hooks.example.com/gapwatch")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2, 3))
    group = make_group(cluster, "billing", state="Empty", member_count=0)
    return [
        make_finding(group, generation, 2, committed_offset=60, backfill_start=0, backfill_end=40),
        make_finding(group, generation, 3, committed_offset=50, backfill_start=10, backfill_end=50),
    ]


def _run(job, result: dict) -> None:
    for old, new in (("approved", "queued"), ("queued", "running")):
        assert job_transition(job_id=job.id, from_statuses=[old], to_status=new)
    assert job_transition(job_id=job.id, from_statuses=["running"], to_status="succeeded", result=result)


def test_a_verified_reset_repairs_its_findings_with_what_it_re_delivered(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[f.id for f in two_findings], kind="reset", params={})
    _run(job, {"verified": True, "partitions": [
        {"topic": "orders", "partition": 2, "before": 60, "planned": 0, "after": 0},
        {"topic": "orders", "partition": 3, "before": 50, "planned": 0, "after": 0},
    ]})

    first, second = Finding.objects.filter(id__in=[f.id for f in two_findings]).order_by("partition")
    assert (first.resolution, first.resolved_by_job_id, first.closed_by) == ("repaired", job.id, approver)
    assert (first.recovered_messages, first.redelivered_messages) == (40, 60)
    assert (second.recovered_messages, second.redelivered_messages) == (40, 50)
    assert first.closed_reason == (f"repaired by reset job {job.id}: offsets reset to 0 (committed was 60); "
                                   "60 messages re-delivered, 40 of them missed before")
    audited = AuditEvent.objects.filter(action="finding.repaired").order_by("object_id")
    assert [a.detail["recovered"] for a in audited] == [40, 40]
    (notification,) = Notification.objects.all()
    assert notification.event == "job.repaired" and notification.url == "https://hooks.example.com/gapwatch"
    assert [f["recovered"] for f in notification.payload["findings"]] == [40, 40]
    assert not Finding.objects.filter(closed_at__isnull=True).exists()


def test_a_backfill_repairs_only_the_partitions_its_result_names(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[f.id for f in two_findings], kind="backfill",
                                  params={"sink": "parquet"})
    _run(job, {"sink": {"kind": "parquet", "output": "/data/out"}, "expected": 40, "delivered": 40, "partitions": [
        {"topic": "orders", "partition": 2, "expected": 40, "delivered": 38, "explained": {"retention": 2}},
    ]})

    repaired = Finding.objects.get(id=two_findings[0].id)
    assert (repaired.resolution, repaired.recovered_messages, repaired.redelivered_messages) == ("repaired", 38, None)
    assert repaired.closed_reason.endswith("38 of 40 records replayed to parquet at /data/out; 2 retention")
    assert Finding.objects.get(id=two_findings[1].id).closed_at is None, "not in the result: not repaired"


def test_it_plans_a_backfill_to_the_first_commit_and_splits_certain_from_possible(approver, two_findings):
    finding = two_findings[0]  # definite [0, 30), first commit 40
    preview = previews.backfill_preview(finding_ids=[finding.id], sink="parquet")

    (row,) = preview["plan"]
    assert (row["start"], row["end"], row["definite"], row["possible"]) == (0, 40, 30, 10)
    assert row["basis"] == "first commit (a bound)"
    assert (preview["total"], preview["total_definite"], preview["total_possible"]) == (40, 30, 10)


def test_a_backfill_to_the_likely_start_closes_as_repaired_to_an_estimate(approver, two_findings):
    finding = two_findings[0]
    Finding.objects.filter(id=finding.id).update(likely_start=35, likely_start_evidence="time index (CreateTime)")
    job = remediation.job_request(user=approver, finding_ids=[finding.id], kind="backfill",
                                  params={"sink": "parquet", "until": "likely"})
    assert job.params == {"sink": "parquet", "until": "likely"}
    assert [(r["start"], r["end"], r["definite"], r["possible"]) for r in job.plan] == [(0, 35, 30, 5)]
    _run(job, {"sink": {"kind": "parquet", "output": "/data/out"}, "expected": 35, "delivered": 35, "partitions": [
        {"topic": "orders", "partition": 2, "expected": 35, "delivered": 35, "explained": {}},
    ]})

    closed = Finding.objects.get(id=finding.id)
    assert (closed.resolution, closed.recovered_messages) == ("partial", 35)
    assert closed.closed_reason == (f"repaired to an estimate by backfill job {job.id}: 35 of 35 records replayed "
                                    "to parquet at /data/out; [35, 40) possibly missed and not covered")
    assert AuditEvent.objects.filter(action="finding.partial", object_id=str(finding.id)).exists()
    assert not AuditEvent.objects.filter(action="finding.repaired").exists()


def test_an_undecided_finding_is_backfilled_to_the_current_end_and_judged_by_the_bound_at_the_end(
    approver, two_findings
):
    undecided = dict(state="undecided", committed_offset=None, backfill_start=None, backfill_end=None,
                     missed_possible=0, high_watermark=70)
    Finding.objects.filter(id__in=[f.id for f in two_findings]).update(**undecided)
    job = remediation.job_request(user=approver, finding_ids=[f.id for f in two_findings], kind="backfill",
                                  params={"sink": "parquet"})
    assert [(r["partition"], r["start"], r["end"], r["basis"]) for r in job.plan] == [
        (2, 0, 70, "current end (no commit yet, so no bound)"), (3, 0, 70, "current end (no commit yet, so no bound)")
    ]
    # Partition 2's first commit (60) arrives while the job runs; partition 3 never commits.
    Finding.objects.filter(id=two_findings[0].id).update(state="gap", first_commit=60, backfill_start=0,
                                                          backfill_end=60)
    _run(job, {"sink": {"kind": "parquet", "output": "/data/out"}, "expected": 140, "delivered": 140, "partitions": [
        {"topic": "orders", "partition": p, "expected": 70, "delivered": 70, "explained": {}} for p in (2, 3)
    ]})

    covered, unbounded = Finding.objects.filter(id__in=[f.id for f in two_findings]).order_by("partition")
    assert covered.resolution == "repaired", "[0, 70) covers the sound range [0, 60)"
    assert unbounded.resolution == "partial"
    assert unbounded.closed_reason.endswith("the group had not committed, so nothing bounds what it skipped "
                                            "from 70 on")


def test_a_pending_finding_cannot_be_backfilled_and_says_what_to_do(approver, two_findings):
    Finding.objects.filter(id=two_findings[0].id).update(state="pending", backfill_start=None, backfill_end=None)
    with pytest.raises(ValidationError) as refused:
        remediation.job_request(user=approver, finding_ids=[two_findings[0].id], kind="backfill", params={})
    assert "reset it to earliest while the group is empty, or wait" in str(refused.value)


def test_a_failed_job_leaves_its_findings_open_and_notifies(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[two_findings[0].id], kind="backfill", params={})
    assert job_transition(job_id=job.id, from_statuses=["approved"], to_status="queued")
    assert job_transition(job_id=job.id, from_statuses=["queued"], to_status="failed", error="broker said no")

    finding = Finding.objects.get(id=two_findings[0].id)
    assert (finding.closed_at, finding.resolution) == (None, "")
    (notification,) = Notification.objects.all()
    assert notification.event == "job.failed" and notification.payload["error"] == "broker said no"
    assert notification.payload["findings"][0]["repaired"] is False


def test_a_move_the_table_does_not_allow_is_refused_and_nothing_is_written(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[two_findings[0].id], kind="reset", params={})
    with pytest.raises(ValueError, match="a remediation job may not move from approved to running"):
        job_transition(job_id=job.id, from_statuses=["approved"], to_status="running")
    with pytest.raises(ValueError, match="from running to cancelled"):
        job_transition(job_id=job.id, from_statuses=["queued", "running"], to_status="cancelled")
    assert RemediationJob.objects.get(id=job.id).status == "approved", "a mistake, not a race: nothing moved"
    assert not AuditEvent.objects.filter(action__in=["job.running", "job.cancelled"]).exists()


def test_a_reset_that_was_not_read_back_equal_repairs_nothing(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[two_findings[0].id], kind="reset", params={})
    _run(job, {"verified": False, "partitions": [
        {"topic": "orders", "partition": 2, "before": 60, "planned": 0, "after": 5}]})

    assert Finding.objects.get(id=two_findings[0].id).closed_at is None


def test_the_job_page_shows_its_result_as_tables_with_readable_times(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[two_findings[0].id], kind="backfill", params={})
    _run(job, {"sink": {"kind": "parquet", "output": "/data/out"}, "expected": 40, "delivered": 38, "seconds": 12.345,
               "partitions": [{"topic": "orders", "partition": 2, "start": 0, "end": 40, "expected": 40,
                               "delivered": 38, "explained": {"retention": 2}, "unexplained": 0, "problems": []}],
               "attempts": [{"attempt": "a1", "mode": "process", "pid": 7, "outcome": "published",
                             "started_at": "2026-11-22T10:00:01.123456+00:00",
                             "ended_at": "2026-11-22T10:00:13.654321+00:00"}]})
    client = Client()
    client.force_login(approver)

    body = client.get(f"/jobs/{job.id}/").content.decode()

    table = body[body.index('<table class="result stack" tabindex="0">'):body.index("</table>", body.index('<table class="result stack" tabindex="0">'))]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table)
    assert cells[:5] == ["orders", "2", "[0, 40)", "40", "38"]
    assert cells[5].startswith("2") and "2 retention" in cells[5] and cells[6] == "0"
    assert "38 delivered of 40 expected" in body and "parquet at /data/out" in body and "12.3 s" in body
    assert "10:00:01" in body and "123456" not in body and not re.search(r":\d\d\.\d{6}", body)
    assert "{'" not in body and "&#x27;sink&#x27;" not in body, "no dictionary dumps"
    assert "repaired" in body and "38 of 40 records replayed" in body


def test_a_dismissal_reason_it_cannot_store_is_refused_and_nothing_is_written(approver, two_findings):
    finding = two_findings[0]
    for reason, said in (("x" * 1001, "at most 1000 characters"), ("a\x00b", "NUL byte"), ("  ", "needs a reason")):
        with pytest.raises(ValidationError, match=said):
            remediation.finding_dismiss(user=approver, finding_id=finding.id, reason=reason)
    assert Finding.objects.get(id=finding.id).closed_at is None and not AuditEvent.objects.exists()

    remediation.finding_dismiss(user=approver, finding_id=finding.id, reason="  a test topic  ")
    assert Finding.objects.get(id=finding.id).closed_reason == "dismissed: a test topic", "stored stripped"


def test_a_systems_error_is_stored_audited_and_sent_cut_to_one_size(approver, two_findings):
    job = remediation.job_request(user=approver, finding_ids=[two_findings[0].id], kind="backfill", params={})
    assert job_transition(job_id=job.id, from_statuses=["approved"], to_status="queued")
    error = "Py4JJavaError: boom\n" + "\tat frame\n" * 2000
    assert job_transition(job_id=job.id, from_statuses=["queued"], to_status="failed", error=error)

    cut = system_text(error)
    assert len(cut) <= TEXT_LIMIT < len(error) and cut.startswith("Py4JJavaError: boom")
    assert RemediationJob.objects.get(id=job.id).error == cut
    assert AuditEvent.objects.get(action="job.failed").detail["error"] == cut
    assert Notification.objects.get().payload["error"] == cut
