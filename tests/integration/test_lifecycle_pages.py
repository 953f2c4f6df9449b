"""The pages show the loop: open work by default, a history of every
finding with its way out, substring filters, the Remediation column, and the
group chart's marks for partitions added and picked up."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from groups.models import Finding, PartitionGeneration
from groups.services import remediation
from groups.services.remediation import job_transition
from groups.web.links import group_url
from tests.factories import NOW, make_cluster, make_finding, make_generation, make_group, make_group_topic, make_topic


@pytest.fixture
def loop(db, approver):
    """billing on hz.repair-qvabxq: partition 2 repaired by a reset, 3 dismissed, 4 expired,
    5 open with a failed backfill, 6 open and untouched; audit on orders: 2 open."""
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "hz.repair-qvabxq")
    generation = make_generation(topic, 2, tuple(range(8)))
    group = make_group(cluster, "billing-qvabxq", state="Empty", member_count=0)
    findings = {p: make_finding(group, generation, p, minutes_ago=p) for p in (2, 3, 4, 5, 6)}
    reset = remediation.job_request(user=approver, finding_ids=[findings[2].id], kind="reset", params={})
    for old, new in (("approved", "queued"), ("queued", "running")):
        job_transition(job_id=reset.id, from_statuses=[old], to_status=new)
    job_transition(job_id=reset.id, from_statuses=["running"], to_status="succeeded", result={
        "verified": True, "partitions": [{"topic": topic.name, "partition": 2, "before": 60, "planned": 0, "after": 0}]})
    remediation.finding_dismiss(user=approver, finding_id=findings[3].id, reason="known noise")
    Finding.objects.filter(id=findings[4].id).update(resolution="expired", closed_at=timezone.now(),
                                                      closed_reason="retention deleted all 40 missed messages")
    failed = remediation.job_request(user=approver, finding_ids=[findings[5].id], kind="backfill", params={})
    job_transition(job_id=failed.id, from_statuses=["approved"], to_status="queued")
    job_transition(job_id=failed.id, from_statuses=["queued"], to_status="failed", error="no broker")
    other = make_group(cluster, "audit")
    orders = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2))
    make_finding(other, orders, 2)
    return {"findings": findings, "reset": reset, "failed": failed, "topic": topic, "group": group}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rows(body: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(0) for m in re.finditer(r'<tr data-finding="(\d+)".*?</tr>', body, re.S)}


def test_the_home_page_lists_open_work_and_counts_the_ways_out(approver, loop):
    body = _client(approver).get("/", {"view": "partitions"}).content.decode()

    rows = _rows(body)
    assert set(rows) == {loop["findings"][5].id, loop["findings"][6].id, *[
        f.id for f in Finding.objects.filter(group__group_id="audit")]}
    assert "repaired 1" in body and "dismissed 1" in body and "expired 1" in body
    failed_row = rows[loop["findings"][5].id]
    assert f'href="/jobs/{loop["failed"].id}/"' in failed_row and "failed" in failed_row
    assert "finding still open" in failed_row


def test_the_history_shows_repaired_findings_with_the_jobs_numbers(approver, loop):
    client = _client(approver)

    body = client.get("/", {"view": "history", "resolution": "repaired"}).content.decode()

    (row,) = _rows(body).values()
    assert f'href="/jobs/{loop["reset"].id}/"' in row and "succeeded" in row
    assert "repaired by reset job" in row and "60 messages re-delivered, 40 of them missed before" in row
    every = _rows(client.get("/", {"view": "history"}).content.decode())
    assert len(every) == 6, "open and closed, any state"
    dismissed = client.get("/findings/table", {"view": "history", "resolution": "dismissed"}).content.decode()
    assert list(_rows(dismissed)) == [loop["findings"][3].id] and "known noise" in dismissed


def test_topic_and_group_filters_match_part_of_a_name(approver, loop):
    client = _client(approver)

    open_work = {"view": "partitions"}
    assert len(_rows(client.get("/", {**open_work, "topic": "hz.repair"}).content.decode())) == 2
    assert len(_rows(client.get("/", {**open_work, "group": "QVABX"}).content.decode())) == 2
    assert len(_rows(client.get("/", {"view": "history", "topic": "repair", "group": "billing"}).content.decode())) == 5
    assert _rows(client.get("/", {**open_work, "topic": "nothing-like-it"}).content.decode()) == {}


def test_the_history_filters_by_days_found_and_refuses_a_bad_date(approver, loop):
    client = _client(approver)
    today = NOW.date()  # the factories' findings were found then
    Finding.objects.filter(id=loop["findings"][6].id).update(created_at=NOW - timedelta(days=3))

    recent = client.get("/", {"view": "history", "since": today.isoformat()}).content.decode()
    assert loop["findings"][6].id not in _rows(recent) and len(_rows(recent)) == 5
    old = client.get("/", {"view": "history", "until": (today - timedelta(days=2)).isoformat()})
    assert list(_rows(old.content.decode())) == [loop["findings"][6].id]
    bad = client.get("/", {"view": "history", "since": "yesterday"})
    assert bad.status_code == 400 and "Enter a valid date" in bad.content.decode()


def test_the_group_chart_marks_partitions_added_and_picked_up(approver, loop):
    now = timezone.now()
    group, topic = loop["group"], loop["topic"]
    make_group_topic(group, topic, 10)
    PartitionGeneration.objects.filter(topic=topic).update(observed_at=now - timedelta(hours=2), added_partitions=[6, 7])
    Finding.objects.filter(id=loop["findings"][6].id).update(pickup_before=now - timedelta(hours=1))

    body = _client(approver).get(group_url(group)).content.decode()

    assert body.count('class="mark mark-added"') == 1 and body.count('class="mark mark-picked_up"') == 1
    assert "hz.repair-qvabxq: partitions 6, 7 added" in body
    assert "hz.repair-qvabxq[6] picked up by the group" in body
