"""The new-partitions page, the approve flows, jobs, and the write API:
permissions on every state-changing path, exactly-one job, escaping, and a
query count that does not grow with the page."""

from __future__ import annotations

import json
import re
import threading

import pytest
from django.db import connection, connections
from django.test import Client

from groups.web.links import group_url
from tests.harness.pages import approve, client_for, previewed
from groups.models import AuditEvent, Finding, RemediationJob
from groups.services.remediation import job_transition
from groups.services.tokens import api_token_create
from tasks.backfill.executor import backfill_request_for
from tests.factories import (
    HOSTILE_GROUP_ID,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_topic,
    user_with_role,
)

ATTRIBUTE_BREAKER = '" onmouseover="x'


@pytest.fixture
def gap_findings(db):
    """Two gap findings of one group (hostile id) on partitions 2 and 3."""
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "orders")
    generation = make_generation(topic, 2, (0, 1, 2, 3))
    group = make_group(cluster, HOSTILE_GROUP_ID, state="Empty", member_count=0)
    return [
        make_finding(group, generation, 2, high_watermark=100, committed_offset=60, backfill_start=0, backfill_end=60),
        make_finding(group, generation, 3, high_watermark=80, committed_offset=50, backfill_start=0, backfill_end=50),
    ]


def test_it_sends_anonymous_visitors_to_the_login_page(client, db):
    response = client.get("/")
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_it_lists_findings_with_counts_and_escapes_hostile_group_ids(approver, gap_findings):
    body = client_for(approver).get("/", {"view": "partitions"}).content.decode()
    assert HOSTILE_GROUP_ID not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "gap 2" in body and "pending 0" in body
    assert "30 / 10" in body  # missed definite / possible of the factory's findings


def test_it_filters_by_a_hostile_group_id_and_by_state(approver, gap_findings):
    client = client_for(approver)
    other = make_group(gap_findings[0].cluster, "plain-group")
    make_finding(other, gap_findings[0].generation, 2, state="pending")
    page = client.get("/findings/table", {"group": HOSTILE_GROUP_ID})
    rows = page.content.decode().count('data-finding="')
    assert rows == 2
    assert client.get("/findings/table", {"state": "pending"}).content.decode().count('data-finding="') == 1


def test_the_home_page_query_count_does_not_grow_with_the_page(approver, gap_findings, django_assert_max_num_queries):
    client = client_for(approver)
    client.get("/")  # warm the session and permission caches
    group, generation = gap_findings[0].group, gap_findings[0].generation
    for partition in range(4, 64):
        make_finding(group, generation, partition)
    # 12: the page's (its counts in two: open by state, closed by resolution), and two for the
    # person's team scope (their directory identity, their roles).
    with django_assert_max_num_queries(12) as few:
        assert client.get("/findings/table").status_code == 200
    for partition in range(64, 400):
        make_finding(group, generation, partition)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get("/findings/table")
    assert response.content.decode().count('data-finding="') == 50  # a full page either way


def test_the_reset_preview_shows_the_plan_and_whether_the_group_is_empty(approver, gap_findings):
    ids = ",".join(str(f.id) for f in gap_findings)
    body = client_for(approver).get("/findings/reset", {"ids": ids}).content.decode()
    assert "empty" in body and "Approve reset" in body
    # Earliest: planned 0 on both partitions, re-delivering 60 and 50.
    assert '<td class="num"><strong>0</strong></td>' in body
    assert '<td class="num">60</td>' in body and '<td class="num">50</td>' in body


def test_it_creates_no_job_when_the_reset_values_changed_since_the_preview(approver, gap_findings):
    """Issue 26: target changed to an offset on screen, Approve pressed without Preview."""
    client = client_for(approver)
    ids = ",".join(str(f.id) for f in gap_findings)
    fingerprint = previewed(client, "reset", {"ids": ids, "target": "earliest"})
    response = client.post("/findings/reset/approve",
                           {"ids": ids, "target": "offset", "value": "40", "previewed": fingerprint})
    body = response.content.decode()
    assert response.status_code == 409
    assert "The values changed since the preview; check the plan below and approve again." in body
    assert RemediationJob.objects.count() == 0
    # The page is the preview of what was received: offset 40, planned 40 on both partitions.
    assert '<option value="offset" selected>' in body and 'name="value" value="40"' in body
    assert body.count('<td class="num"><strong>40</strong></td>') == 2
    again = re.search(r'name="previewed" value="([^"]*)"', body).group(1)
    assert again != fingerprint
    approved = client.post("/findings/reset/approve",
                           {"ids": ids, "target": "offset", "value": "40", "previewed": again})
    job = RemediationJob.objects.get()
    assert approved.status_code == 302 and approved.url == f"/jobs/{job.id}/"
    assert job.params == {"target": "offset", "value": 40}
    assert [(p["partition"], p["current"], p["planned"], p["redelivered"]) for p in job.plan] == [
        (2, 60, 40, 20), (3, 50, 40, 10)]


def test_it_approves_exactly_the_previewed_reset_and_the_job_page_shows_its_stored_plan(approver, gap_findings):
    client = client_for(approver)
    values = {"ids": gap_findings[0].id, "target": "shift", "value": "-15"}
    response = approve(client, "reset", values)
    job = RemediationJob.objects.get()
    assert response.status_code == 302 and response.url == f"/jobs/{job.id}/"
    assert job.params == {"target": "shift", "value": -15}
    # The planner's rows only: the executor compares its re-plan with them.
    assert job.plan == [{"topic": "orders", "partition": 2, "log_start": 0, "high_watermark": 100, "current": 60,
                         "planned": 45, "clamped": False, "redelivered": 15, "skipped": 0, "note": ""}]
    page = client.get(f"/jobs/{job.id}/").content.decode()
    params = re.search(r'<dd class="job-params">(.*?)</dd>', page).group(1)
    assert sorted(params.split("; ")) == ["target: shift", "value: -15"]
    assert f'<a href="/findings/{gap_findings[0].id}/">orders[2]</a>' in page  # the job links its findings
    # ... and its audit trail, as the finding's page links its own.
    assert f'href="/audit/?object_type=job&amp;object_id={job.id}"' in page
    finding_page = client.get(f"/findings/{gap_findings[0].id}/").content.decode()
    assert f'href="/audit/?object_type=finding&amp;object_id={gap_findings[0].id}"' in finding_page
    assert ('<td data-label="Committed at plan time" class="num">60</td><td data-label="Planned" class="num">45</td>'
            '<td data-label="Re-delivered" class="num">15</td>') in page


@pytest.mark.parametrize(("shown", "sent", "destination", "why"), [
    ({"sink": "parquet"}, {"sink": "kafka"}, "orders.replay", "the sink changed from Parquet to a replay topic"),
    ({"sink": "kafka", "replay_topic": "orders.recovered"}, {"sink": "kafka", "replay_topic": "orders.other"},
     "orders.other", "the replay topic changed"),
    ({"sink": "handler", "handler": "builtins.list"}, {"sink": "handler", "handler": "builtins.sorted"},
     "builtins.sorted", "the handler changed"),
])
def test_it_creates_no_backfill_when_the_sink_changed_since_the_preview(approver, gap_findings, settings, shown,
                                                                        sent, destination, why):
    settings.BACKFILL_HANDLERS = ("builtins.list", "builtins.sorted")
    client = client_for(approver)
    ids = {"ids": gap_findings[0].id}
    fingerprint = previewed(client, "backfill", {**ids, **shown})
    response = client.post("/findings/backfill/approve", {**ids, **sent, "previewed": fingerprint})
    body = response.content.decode()
    assert response.status_code == 409, why
    assert "The values changed since the preview" in body and RemediationJob.objects.count() == 0
    assert f'<code class="destination">{destination}</code>' in body
    again = re.search(r'name="previewed" value="([^"]*)"', body).group(1)
    assert client.post("/findings/backfill/approve", {**ids, **sent, "previewed": again}).status_code == 302
    assert RemediationJob.objects.get().params == sent, why


def test_the_backfill_preview_splits_certain_losses_from_possible_duplicates_and_ends_at_the_bound(
    approver, gap_findings
):
    client = client_for(approver)
    body = client.get("/findings/backfill", {"ids": gap_findings[0].id, "sink": "parquet"}).content.decode()
    # Finding 2: definite [0, 30) (missed_definite 30), first commit 60.
    row = re.search(r"<tr><td>orders</td><td class=\"num\">2</td>(.*?)</tr>", body, re.S).group(1)
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["0", "60", "60", "30", "30"]
    assert "first commit (a bound)" in row and "repaired to an estimate" not in body


def test_an_approver_may_end_a_backfill_at_the_likely_start_and_is_told_what_that_means(approver, gap_findings):
    Finding.objects.filter(id=gap_findings[0].id).update(likely_start=45, likely_start_evidence="time index (CreateTime)")
    client = client_for(approver)
    values = {"ids": gap_findings[0].id, "sink": "parquet"}
    fingerprint = previewed(client, "backfill", values)
    # The range end changed on screen without a new preview: no job, the preview of what was sent.
    response = client.post("/findings/backfill/approve", {**values, "until": "likely", "previewed": fingerprint})
    body = response.content.decode()
    assert response.status_code == 409 and RemediationJob.objects.count() == 0
    assert "likely start (an estimate)" in body and "repaired to an" in body
    again = re.search(r'name="previewed" value="([^"]*)"', body).group(1)
    assert client.post("/findings/backfill/approve", {**values, "until": "likely", "previewed": again}).status_code == 302
    job = RemediationJob.objects.get()
    assert job.params == {"sink": "parquet", "until": "likely"}
    assert [(r["start"], r["end"], r["definite"], r["possible"]) for r in job.plan] == [(0, 45, 30, 15)]


def test_a_likely_start_that_is_not_known_yet_is_a_clear_400(approver, gap_findings):
    response = client_for(approver).get("/findings/backfill", {"ids": gap_findings[0].id, "until": "likely"})
    assert response.status_code == 400
    assert "no likely start is known; backfill to the bound instead" in response.content.decode()


@pytest.mark.parametrize("fingerprint", [None, "", "garbled", "<script>alert(1)</script>", "0" * 64, "é" * 5000])
def test_a_missing_or_garbled_fingerprint_is_a_re_preview_not_a_job(approver, gap_findings, fingerprint):
    values = {"ids": gap_findings[0].id, "target": "offset", "value": "40"}
    if fingerprint is not None:
        values["previewed"] = fingerprint
    response = client_for(approver).post("/findings/reset/approve", values)
    body = response.content.decode()
    assert response.status_code == 409
    assert "The values changed since the preview" in body and "<script>alert(1)</script>" not in body
    assert RemediationJob.objects.count() == 0


def test_a_fingerprint_covers_the_findings_too(approver, gap_findings):
    client = client_for(approver)
    one = previewed(client, "reset", {"ids": gap_findings[0].id, "target": "earliest"})
    both = ",".join(str(f.id) for f in gap_findings)
    response = client.post("/findings/reset/approve", {"ids": both, "target": "earliest", "previewed": one})
    assert response.status_code == 409 and RemediationJob.objects.count() == 0


def test_the_preview_button_of_the_approve_form_shows_the_preview_of_the_values_on_screen(approver, gap_findings):
    client = client_for(approver)
    response = client.post("/findings/reset/approve", {"ids": gap_findings[0].id, "target": "offset", "value": "40",
                                                       "previewed": "stale", "preview": "1"})
    assert response.status_code == 302
    assert response.url == f"/findings/reset?ids={gap_findings[0].id}&target=offset&value=40"
    assert RemediationJob.objects.count() == 0
    body = client.get("/findings/reset", {"ids": gap_findings[0].id, "target": "offset", "value": "40"}).content
    assert b'form="reset-form"' in body and b'name="value" value="40"' in body


def test_the_reset_preview_shows_missed_beside_redelivered_and_recommends_a_backfill(approver, db):
    """The demo: an earliest reset re-delivers 1,034 records for 73 missed."""
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2))
    group = make_group(cluster, "billing", state="Empty", member_count=0)
    finding = make_finding(group, generation, 2, high_watermark=1100, committed_offset=1034, missed_definite=70,
                           missed_possible=3)
    client = client_for(approver)
    body = client.get("/findings/reset", {"ids": finding.id}).content.decode()
    assert '<td class="num missed">70 / 3</td>\n      <td class="num">1034</td>' in body
    assert "This reset re-delivers 1034 offsets to recover at most\n  73 missed." in body
    assert f'<a href="/findings/backfill?ids={finding.id}">preview a backfill of the same findings</a>' in body
    shifted = client.get("/findings/reset", {"ids": finding.id, "target": "shift", "value": "-500"}).content.decode()
    assert "70 / 3" in shifted and "recommend-backfill" not in shifted  # 500 for 73 is not over 10 times


def test_a_reset_redelivering_about_what_was_missed_recommends_nothing(approver, gap_findings):
    body = client_for(approver).get("/findings/reset", {"ids": gap_findings[0].id}).content.decode()
    assert '<td class="num missed">30 / 10</td>' in body and "recommend-backfill" not in body


def test_a_bad_reset_target_is_a_clear_400_and_creates_nothing(approver, gap_findings):
    client = client_for(approver)
    response = client.post("/findings/reset/approve", {"ids": gap_findings[0].id, "target": "offset", "value": "-5"})
    assert response.status_code == 400
    assert "offset must not be negative" in response.content.decode()
    assert RemediationJob.objects.count() == 0


def test_approving_creates_one_audited_job_and_a_double_click_lands_on_it(approver, gap_findings):
    client = client_for(approver)
    ids = ",".join(str(f.id) for f in gap_findings)
    first = approve(client, "backfill", {"ids": ids, "sink": "parquet"})
    job = RemediationJob.objects.get()
    assert first.status_code == 302 and first.url == f"/jobs/{job.id}/"
    assert (job.kind, job.status, job.approved_by, job.params) == ("backfill", "approved", approver, {"sink": "parquet"})
    assert job.plan == [
        {"topic": "orders", "partition": 2, "start": 0, "end": 60, "count": 60, "definite": 30, "possible": 30,
         "basis": "first commit (a bound)"},
        {"topic": "orders", "partition": 3, "start": 0, "end": 50, "count": 50, "definite": 30, "possible": 20,
         "basis": "first commit (a bound)"},
    ]
    second = approve(client, "backfill", {"ids": ids, "sink": "parquet"})
    assert second.status_code == 302 and second.url == f"/jobs/{job.id}/"
    assert RemediationJob.objects.count() == 1
    assert set(AuditEvent.objects.filter(object_id=str(job.id)).values_list("action", flat=True)) >= {
        "job.requested", "job.approved"
    }
    detail = client.get(f"/jobs/{job.id}/").content.decode()
    assert HOSTILE_GROUP_ID not in detail and "Cancel" in detail


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_approvals_of_one_finding_create_exactly_one_job():
    approver = user_with_role("race", "approver")
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2))
    finding = make_finding(make_group(cluster, "g"), generation, 2)
    barrier = threading.Barrier(20)
    statuses: list[int] = []
    values = {"ids": finding.id, "target": "earliest"}
    values["previewed"] = previewed(client_for(approver), "reset", values)

    def approve():
        client = client_for(approver)
        barrier.wait()
        try:
            response = client.post("/findings/reset/approve", values)
            statuses.append(response.status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=approve) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == [302] * 20
    assert RemediationJob.objects.count() == 1
    assert Finding.objects.get(id=finding.id).job_findings.filter(active=True).count() == 1


STATE_CHANGING = [
    ("/findings/reset/approve", {"target": "earliest"}),
    ("/findings/backfill/approve", {"sink": "parquet"}),
    ("/findings/{finding}/dismiss/confirm", {"reason": "noise"}),
    ("/findings/dismiss/confirm", {"reason": "noise"}),
    ("/jobs/{job}/cancel", {}),
    ("/jobs/{job}/retry", {}),
    ("/jobs/{job}/approve", {}),
]


@pytest.fixture
def a_job(approver, gap_findings):
    approve(client_for(approver), "reset", {"ids": gap_findings[0].id})
    return RemediationJob.objects.get()


def test_the_job_page_lists_each_attempt_and_where_it_ran(approver, gap_findings):
    client = client_for(approver)
    approve(client, "backfill", {"ids": gap_findings[0].id, "sink": "parquet"})
    job = RemediationJob.objects.get()
    job.result = {"attempts": [
        {"attempt": "a1", "mode": "connect", "pid": None, "server": "localhost:15002", "session_id": "5e55-10n",
         "tag": "gapwatch-backfill-1-a1", "outcome": "killed by the Spark Connect server going away",
         "timings": {"startup": 0.01, "write": 2.5}},
        {"attempt": "a2", "mode": "process", "pid": 5151, "outcome": "published",
         "connect_unavailable": "no Spark Connect server at <srv>", "timings": {"startup": 6.2, "verify": 4.4,
                                                                             "write": 10.1}},
        {"attempt": "a0", "mode": "host", "pid": 4242, "outcome": "published",  # a row from before Spark Connect
         "host_unavailable": "no Spark host on <sock>"},
    ]}
    job.save()
    body = client.get(f"/jobs/{job.id}/").content.decode()
    table = body[body.index('<table class="attempts stack"'):body.index("</table>", body.index('<table class="attempts stack"'))]
    assert "Spark Connect localhost:15002" in table and "own Spark process" in table and "Spark host" in table
    assert "5e55-10n" in table and "5151" in table and "4242" in table
    # Durations as durations: 0.01 s of start-up, 10.1 s of read + write, 4.4 s of verification.
    assert '<td data-label="Start-up" class="num">10 ms</td>' in table
    assert '<td data-label="Read + write" class="num">10.1 s</td>' in table
    assert '<td data-label="Verify" class="num">4.4 s</td>' in table
    assert "no Spark Connect server at &lt;srv&gt;" in table and "<srv>" not in table
    assert "no Spark host on &lt;sock&gt;" in table and "<sock>" not in table


@pytest.mark.parametrize(("url", "data"), STATE_CHANGING, ids=[u for u, _ in STATE_CHANGING])
def test_a_viewer_is_refused_every_state_change_and_get_is_405(viewer, gap_findings, a_job, url, data):
    url = url.format(finding=gap_findings[0].id, job=a_job.id)
    client = client_for(viewer)
    assert client.post(url, {"ids": gap_findings[1].id, **data}).status_code == 403
    assert client.get(url).status_code == 405
    a_job.refresh_from_db()
    assert a_job.status == "approved" and Finding.objects.filter(closed_at__isnull=False).count() == 0


@pytest.mark.parametrize(("url", "data"), STATE_CHANGING, ids=[u for u, _ in STATE_CHANGING])
def test_a_post_without_a_csrf_token_is_refused(approver, gap_findings, a_job, url, data):
    url = url.format(finding=gap_findings[0].id, job=a_job.id)
    assert client_for(approver, csrf=True).post(url, {"ids": gap_findings[1].id, **data}).status_code == 403


def test_dismissing_needs_a_reason_and_is_audited(approver, gap_findings):
    client = client_for(approver)
    url = f"/findings/{gap_findings[0].id}/dismiss/confirm"
    assert client.post(url, {"reason": "  "}).status_code == 400
    assert client.post(url, {"reason": "replayed by hand"}).status_code == 302
    finding = Finding.objects.get(id=gap_findings[0].id)
    assert finding.closed_reason == "dismissed: replayed by hand" and finding.closed_by == approver
    assert AuditEvent.objects.get(action="finding.dismissed").detail["reason"] == "replayed by hand"


def test_cancel_and_retry_follow_the_job_state(approver, gap_findings, a_job):
    client = client_for(approver)
    assert client.post(f"/jobs/{a_job.id}/retry").status_code == 302  # refused: not failed (message shown)
    assert RemediationJob.objects.count() == 1
    assert client.post(f"/jobs/{a_job.id}/cancel").status_code == 302
    a_job.refresh_from_db()
    assert a_job.status == "cancelled"
    # Cancelling freed the finding: a new job of the same kind is allowed.
    approve(client, "reset", {"ids": gap_findings[0].id})
    assert RemediationJob.objects.filter(status="approved").count() == 1
    failed = RemediationJob.objects.get(status="approved")
    assert job_transition(job_id=failed.id, from_statuses=["approved"], to_status="queued")
    assert job_transition(job_id=failed.id, from_statuses=["queued"], to_status="failed", error="broker said no")
    assert client.post(f"/jobs/{failed.id}/retry").status_code == 302
    assert RemediationJob.objects.get(retry_of=failed).status == "approved"


def test_four_eyes_the_requester_cannot_approve_but_another_approver_can(settings, approver, gap_findings):
    settings.FOUR_EYES = True
    approve(client_for(approver), "reset", {"ids": gap_findings[0].id})
    job = RemediationJob.objects.get()
    assert job.status == "requested"
    assert client_for(approver).post(f"/jobs/{job.id}/approve").status_code == 403
    second = user_with_role("bob", "approver")
    assert client_for(second).post(f"/jobs/{job.id}/approve").status_code == 302
    job.refresh_from_db()
    assert (job.status, job.approved_by) == ("approved", second)


def test_an_approver_chooses_the_replay_topic_of_a_backfill(approver, gap_findings):
    client = client_for(approver)
    ids = ",".join(str(f.id) for f in gap_findings)
    chosen = {"ids": ids, "sink": "kafka", "replay_topic": "orders.recovered"}
    preview = client.get("/findings/backfill", chosen)
    assert preview.status_code == 200
    assert '<code class="destination">orders.recovered</code>' in preview.content.decode()
    assert approve(client, "backfill", chosen).status_code == 302
    job = RemediationJob.objects.get()
    assert job.params == {"sink": "kafka", "replay_topic": "orders.recovered"}
    assert backfill_request_for(job).replay_topics == {"orders": "orders.recovered"}


def test_without_a_choice_the_replay_topic_is_the_groups_or_topic_dot_replay(approver, gap_findings):
    client = client_for(approver)
    ids = ",".join(str(f.id) for f in gap_findings)
    body = client.get("/findings/backfill", {"ids": ids, "sink": "kafka"}).content.decode()
    assert '<code class="destination">orders.replay</code>' in body
    group = gap_findings[0].group
    group.replay_topic = "orders.group-replay"
    group.save()
    body = client.get("/findings/backfill", {"ids": ids, "sink": "kafka"}).content.decode()
    assert '<code class="destination">orders.group-replay</code>' in body


@pytest.mark.parametrize("replay_topic, message", [
    ("orders", "must not be the topic the records come from"),
    ("<script>alert(1)</script>", "letters, digits, dots, underscores or dashes"),
    ("x" * 250, "letters, digits, dots, underscores or dashes"),
])
def test_a_bad_replay_topic_is_a_clear_400_and_creates_nothing(approver, gap_findings, replay_topic, message):
    response = client_for(approver).post("/findings/backfill/approve", {
        "ids": gap_findings[0].id, "sink": "kafka", "replay_topic": replay_topic})
    body = response.content.decode()
    assert response.status_code == 400 and message in body
    assert "<script>alert(1)</script>" not in body
    assert RemediationJob.objects.count() == 0


def test_the_handler_sink_takes_only_a_handler_the_administrator_listed(approver, gap_findings, settings):
    client = client_for(approver)
    ids = ",".join(str(f.id) for f in gap_findings)
    assert "Python handler" not in client.get("/findings/backfill", {"ids": ids}).content.decode()
    refused = client.post("/findings/backfill/approve", {"ids": ids, "sink": "handler", "handler": "builtins.list"})
    assert refused.status_code == 400 and "none is configured" in refused.content.decode()

    settings.BACKFILL_HANDLERS = ("builtins.list", "builtins.sorted")
    page = client.get("/findings/backfill", {"ids": ids, "sink": "handler", "handler": "builtins.sorted"})
    assert "Python handler" in page.content.decode()
    assert '<code class="destination">builtins.sorted</code>' in page.content.decode()
    refused = client.post("/findings/backfill/approve", {"ids": ids, "sink": "handler", "handler": "os.system"})
    assert refused.status_code == 400
    assert "listed in BACKFILL_HANDLERS (builtins.list, builtins.sorted)" in refused.content.decode()
    assert RemediationJob.objects.count() == 0
    assert approve(client, "backfill", {"ids": ids, "sink": "handler", "handler": "builtins.sorted"}).status_code == 302
    job = RemediationJob.objects.get()
    assert job.params == {"sink": "handler", "handler": "builtins.sorted"}
    assert backfill_request_for(job).handler == "builtins.sorted"


def test_the_write_api_takes_a_replay_topic_and_refuses_one_that_is_not_text(approver, gap_findings):
    client = client_for(approver)
    url = f"/api/v1/findings/{gap_findings[0].id}/approve"
    refused = client.post(url, data=json.dumps({"kind": "backfill", "sink": "kafka", "replay_topic": ["a"]}),
                          content_type="application/json")
    assert refused.status_code == 400 and "must be text" in refused.content.decode()
    created = client.post(url, data=json.dumps({"kind": "backfill", "sink": "kafka", "replay_topic": "orders.r"}),
                          content_type="application/json")
    assert created.status_code == 201, created.content
    assert RemediationJob.objects.get().params == {"sink": "kafka", "replay_topic": "orders.r"}


def test_an_api_approval_without_a_sink_uses_the_groups_default_sink_and_replay_topic(approver, gap_findings):
    """One service applies the group's defaults for every caller: the API
    without a sink behaves like the page without one."""
    group = gap_findings[0].group
    group.backfill_sink, group.replay_topic = "kafka", "orders.group-replay"
    group.save()
    created = client_for(approver).post(f"/api/v1/findings/{gap_findings[0].id}/approve",
                                        data=json.dumps({"kind": "backfill"}), content_type="application/json")
    assert created.status_code == 201, created.content
    job = RemediationJob.objects.get()
    assert job.params == {"sink": "kafka", "replay_topic": "orders.group-replay"}
    assert created.json()["params"] == job.params
    assert backfill_request_for(job).replay_topics == {"orders": "orders.group-replay"}


def test_an_api_approval_without_a_sink_of_a_parquet_group_writes_parquet(approver, gap_findings):
    created = client_for(approver).post(f"/api/v1/findings/{gap_findings[0].id}/approve",
                                        data=json.dumps({"kind": "backfill"}), content_type="application/json")
    assert created.status_code == 201, created.content
    assert RemediationJob.objects.get().params == {"sink": "parquet"}


def test_the_write_api_with_a_token_approves_and_lists_jobs(approver, viewer, gap_findings):
    _, key = api_token_create(user=approver, name="ci")
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    response = api.post(f"/api/v1/findings/{gap_findings[0].id}/approve",
                        data=json.dumps({"kind": "reset", "target": "offset", "value": 1000}),
                        content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["kind"], body["status"], body["group"]) == ("reset", "approved", HOSTILE_GROUP_ID)
    assert body["plan"][0]["planned"] == 100 and body["plan"][0]["clamped"] is True
    again = api.post(f"/api/v1/findings/{gap_findings[0].id}/approve", data=json.dumps({"kind": "reset"}),
                     content_type="application/json")
    assert again.status_code == 409 and again.json()["job"] == body["id"]
    listed = api.get("/api/v1/jobs").json()
    assert [job["id"] for job in listed["results"]] == [body["id"]]
    _, viewer_key = api_token_create(user=viewer, name="read-only")
    refused = Client(HTTP_AUTHORIZATION=f"Token {viewer_key}").post(
        f"/api/v1/findings/{gap_findings[1].id}/dismiss", data=json.dumps({"reason": "x"}),
        content_type="application/json")
    assert refused.status_code == 403
    assert Client(HTTP_AUTHORIZATION="Token wrong").get("/api/v1/jobs").status_code == 401


def test_the_write_api_with_a_session_still_needs_csrf(approver, gap_findings):
    response = client_for(approver, csrf=True).post(
        f"/api/v1/findings/{gap_findings[0].id}/dismiss", data=json.dumps({"reason": "x"}),
        content_type="application/json")
    assert response.status_code == 403
    assert Finding.objects.filter(closed_at__isnull=False).count() == 0


def test_the_api_rejects_bad_bodies_with_the_parameter_named(approver, gap_findings):
    client = client_for(approver)
    url = f"/api/v1/findings/{gap_findings[0].id}/approve"
    assert client.post(url, data="[1]", content_type="application/json").json()["parameter"] == "body"
    assert client.post(url, data=json.dumps({"kind": "nuke"}), content_type="application/json").json()[
        "parameter"] == "kind"
    assert client.get(url).status_code == 405
    assert connection.vendor == "postgresql"


def test_the_group_page_lists_members_and_their_assignments_as_text(viewer, gap_findings):
    group = gap_findings[0].group
    group.members = [{"member_id": "m-1", "client_id": ATTRIBUTE_BREAKER, "host": "/10.0.0.9",
                      "assignment": [["orders", 2], ["orders", 3]]}]
    group.save()
    body = client_for(viewer).get(group_url(group)).content.decode()
    assert ATTRIBUTE_BREAKER not in body and "&quot; onmouseover=&quot;x" in body
    assert "orders[2], orders[3]" in body and "/10.0.0.9" in body


def test_a_single_approval_after_a_poll_re_accounted_the_finding_creates_nothing(approver, gap_findings):
    """Issue 34: one fingerprint for single and bulk approvals, of the plan and
    each finding's accounting too, checked in the service: a first commit
    seen between the preview and the click moved the bound."""
    client = client_for(approver)
    ids = {"ids": gap_findings[0].id}
    fingerprint = previewed(client, "backfill", {**ids, "sink": "parquet"})
    Finding.objects.filter(id=gap_findings[0].id).update(missed_possible=12, backfill_end=42)
    response = client.post("/findings/backfill/approve", {**ids, "sink": "parquet", "previewed": fingerprint})
    assert response.status_code == 409 and RemediationJob.objects.count() == 0
    body = response.content.decode()
    assert "The values changed since the preview" in body
    again = re.search(r'name="previewed" value="([^"]*)"', body).group(1)
    assert client.post("/findings/backfill/approve", {**ids, "sink": "parquet", "previewed": again}).status_code == 302
    assert [(row["start"], row["end"]) for row in RemediationJob.objects.get().plan] == [(0, 42)]


def test_a_viewer_posting_an_approval_or_a_dismissal_gets_a_403_and_nothing_is_written(viewer, gap_findings):
    """The approver check is the service's, once per request (the views no
    longer check first): a viewer's POST still ends in a 403, with no job,
    no closed finding and no audit row."""
    client = client_for(viewer)
    finding = gap_findings[0]
    audit_rows = AuditEvent.objects.count()
    approval = client.post("/findings/reset/approve", {"ids": finding.id, "target": "shift", "value": "-15",
                                                       "previewed": "anything"})
    dismissal = client.post(f"/findings/{finding.id}/dismiss/confirm", {"reason": "not ours"})
    assert (approval.status_code, dismissal.status_code) == (403, 403)
    assert not RemediationJob.objects.exists()
    finding.refresh_from_db()
    assert finding.closed_at is None
    assert AuditEvent.objects.count() == audit_rows
