"""A group's kind (issue 25 item 5) wherever a group appears: the home page's
cards, the findings list and history, a finding's page, the groups pages,
job pages, the findings' filter, the API and a job's webhook. Real
PostgreSQL; /metrics' group_type label is in test_metrics.py."""

from __future__ import annotations

import json
import re

import pytest

from groups.domain.group_kinds import GROUP_KINDS, group_kind
from groups.models import ConsumerGroup, Finding, Notification
from groups.selectors.lists import findings_list, groups_list
from groups.services import remediation
from groups.services.remediation import job_transition
from groups.web.links import group_url
from tests.factories import HOSTILE_GROUP_ID, make_cluster, make_finding, make_generation, make_group, make_topic
from tests.harness.pages import client_for

ESCAPED_HOSTILE_ID = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture
def kinds(db):
    """One group of every kind on cluster prod, each with an open gap on
    orders[2]: the share group has the hostile id; the Connect sink's group
    uses the KIP-848 protocol; "fresh" has not been described yet. By name:
    group and finding."""
    cluster = make_cluster("prod", webhook_url="https://hooks.example.com/gapwatch")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2))
    groups = {
        "classic": make_group(cluster, "billing", type="classic", state="Empty", member_count=0),
        "share": make_group(cluster, HOSTILE_GROUP_ID, type="share"),
        "consumer": make_group(cluster, "payments", type="consumer"),
        "streams": make_group(cluster, "wordcount", type="streams"),
        "connect": make_group(cluster, "connect-s3-sink", type="consumer"),
        "unknown": make_group(cluster, "fresh", type=""),
    }
    return {kind: (group, make_finding(group, generation, 2, committed_offset=60, backfill_start=0, backfill_end=40))
            for kind, group in groups.items()}


def _between(body: str, start: str, end: str) -> str:
    """The text from ``start`` to the next ``end``: one card, row or fact list."""
    at = body.index(start)
    return body[at:body.index(end, at)]


def test_the_database_filter_selects_exactly_the_groups_group_kind_names(kinds):
    # A classic group with Connect's prefix, and a share group with it: neither is the other's kind.
    cluster = kinds["classic"][0].cluster
    make_group(cluster, "connect-jdbc-sink", type="classic")
    make_group(cluster, "connect-shared", type="share")
    make_group(cluster, "legacy", type="unknown")
    every = list(ConsumerGroup.objects.all())
    for kind in GROUP_KINDS:
        named = {group.id for group in every if group_kind(group.type, group.group_id) == kind}
        assert named, f"the fixture has a group of kind {kind}"
        assert {group.id for group in groups_list(group_type=kind)} == named, kind
        assert {finding.group_id for finding in findings_list(group_type=kind)} == named & {
            finding.group_id for finding in Finding.objects.all()}, kind
    with pytest.raises(ValueError, match="unknown group type 'Share'"):
        findings_list(group_type="Share")


def test_the_home_page_card_of_each_group_names_its_kind(viewer, kinds):
    body = client_for(viewer).get("/").content.decode()
    assert HOSTILE_GROUP_ID not in body and ESCAPED_HOSTILE_ID in body
    for kind, label in (("share", "share (KIP-932)"), ("classic", "classic"), ("connect", "Kafka Connect sink"),
                        ("unknown", "not yet described")):
        card = _between(body, f'data-group="{kinds[kind][0].id}"', "</article>")
        assert f'<span class="kind kind-{kind}">{label}</span>' in card, kind


def test_each_row_of_the_findings_list_and_history_names_its_groups_kind(viewer, kinds):
    client = client_for(viewer)
    for view in ("partitions", "history"):
        body = client.get("/", {"view": view}).content.decode()
        assert HOSTILE_GROUP_ID not in body and ESCAPED_HOSTILE_ID in body
        share_row = _between(body, f'data-finding="{kinds["share"][1].id}"', "</tr>")
        classic_row = _between(body, f'data-finding="{kinds["classic"][1].id}"', "</tr>")
        assert '<span class="kind kind-share">share (KIP-932)</span>' in share_row, view
        assert '<span class="kind kind-classic">classic</span>' in classic_row, view


def test_a_findings_page_names_its_groups_kind(viewer, kinds):
    client = client_for(viewer)
    share = client.get(f"/findings/{kinds['share'][1].id}/").content.decode()
    assert "share (KIP-932)" in share and HOSTILE_GROUP_ID not in share and ESCAPED_HOSTILE_ID in share
    assert "streams (KIP-1071)" in client.get(f"/findings/{kinds['streams'][1].id}/").content.decode()


def test_the_groups_pages_name_each_groups_kind(viewer, kinds):
    client = client_for(viewer)
    share_page = client.get(group_url(kinds['share'][0])).content.decode()
    assert '<dt>Type</dt><dd class="group-kind">share (KIP-932)</dd>' in share_page
    assert ESCAPED_HOSTILE_ID in share_page and HOSTILE_GROUP_ID not in share_page
    assert '<dd class="group-kind">consumer (KIP-848)</dd>' in client.get(
        group_url(kinds['consumer'][0])).content.decode()
    listing = client.get("/groups/").content.decode()
    for kind, label in (("share", "share (KIP-932)"), ("classic", "classic"), ("connect", "Kafka Connect sink")):
        row = _between(listing, f'data-group="{kinds[kind][0].id}"', "</tr>")
        assert f'<td class="group-kind">{label}</td>' in row, kind


@pytest.mark.parametrize("page", ["/", "/findings/table"])
def test_the_findings_filter_keeps_one_kind(viewer, kinds, page):
    response = client_for(viewer).get(page, {"view": "partitions", "group_type": "connect"})
    assert response.status_code == 200
    body = response.content.decode()
    assert set(map(int, re.findall(r'data-finding="(\d+)"', body))) == {kinds["connect"][1].id}
    if page == "/":
        assert '<option value="connect" selected>Kafka Connect sink</option>' in body


@pytest.mark.parametrize("page", ["/", "/findings/triage"])
def test_the_triage_filter_keeps_one_kind(viewer, kinds, page):
    body = client_for(viewer).get(page, {"group_type": "share"}).content.decode()
    assert set(map(int, re.findall(r'<article[^>]* data-group="(\d+)"', body))) == {kinds["share"][0].id}


@pytest.mark.parametrize("page", ["/", "/findings/table", "/findings/triage"])
@pytest.mark.parametrize("view", ["", "partitions", "history"])
def test_an_unknown_kind_is_a_form_error_not_a_500(viewer, kinds, page, view):
    response = client_for(viewer).get(page, {"view": view, "group_type": "<b>sharing</b>"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "data-finding=" not in body and "<article" not in body
    if page == "/":
        assert "group_type: Select a valid choice. &lt;b&gt;sharing&lt;/b&gt; is not one of the available choices." in body


def test_the_api_names_each_kind_and_filters_findings_and_groups_by_it(viewer, kinds):
    client = client_for(viewer)
    findings = client.get("/api/v1/findings").json()["results"]
    assert {f["group"]: f["group_type"] for f in findings} == {
        "billing": "classic", HOSTILE_GROUP_ID: "share", "payments": "consumer", "wordcount": "streams",
        "connect-s3-sink": "connect", "fresh": "unknown"}
    shared = client.get("/api/v1/findings", {"group_type": "share"}).json()
    assert [(f["id"], f["group"]) for f in shared["results"]] == [(kinds["share"][1].id, HOSTILE_GROUP_ID)]
    detail = client.get(f"/api/v1/findings/{kinds['connect'][1].id}").json()
    assert detail["group_type"] == "connect"
    groups = client.get("/api/v1/groups", {"group_type": "connect"}).json()["results"]
    assert [(g["group_id"], g["type"], g["group_type"]) for g in groups] == [("connect-s3-sink", "consumer", "connect")]
    fresh = client.get("/api/v1/groups", {"group_type": "unknown"}).json()["results"]
    assert [(g["group_id"], g["type"], g["group_type"]) for g in fresh] == [("fresh", "", "unknown")]
    bad = client.get("/api/v1/groups", {"group_type": "sharing"})
    assert bad.status_code == 400 and bad.json()["parameter"] == "group_type"


def test_the_findings_downloads_name_each_groups_kind(viewer, kinds):
    response = client_for(viewer).get("/findings/export.json", {"view": "partitions", "group_type": "share"})
    rows = json.loads(b"".join(response.streaming_content))
    assert [(row["group"], row["group_type"]) for row in rows] == [(HOSTILE_GROUP_ID, "share")]


def test_the_jobs_pages_name_the_groups_kind(approver, kinds):
    job = remediation.job_request(user=approver, finding_ids=[kinds["connect"][1].id], kind="reset", params={})
    client = client_for(approver)
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert '<dt>Group type</dt><dd class="group-kind">Kafka Connect sink</dd>' in page
    assert '<span class="kind kind-connect">Kafka Connect sink</span>' in client.get("/jobs/").content.decode()


def test_a_jobs_webhook_names_its_groups_kind(approver, kinds):
    job = remediation.job_request(user=approver, finding_ids=[kinds["consumer"][1].id], kind="reset", params={})
    for old, new in (("approved", "queued"), ("queued", "running")):
        assert job_transition(job_id=job.id, from_statuses=[old], to_status=new)
    assert job_transition(job_id=job.id, from_statuses=["running"], to_status="failed", error="broker away")
    (notification,) = Notification.objects.filter(event="job.failed")
    assert (notification.payload["group"], notification.payload["group_type"]) == ("payments", "consumer")
