"""The console's freshness and one vocabulary (issue 22, items 4 and 8), through
Django's test client on the real database: the last successful poll per
cluster in every page's header, the banner for an unreachable or late cluster,
job pages that refresh while the job is active, one time format, empty states
that say what a filter hid, and sort links that say their direction."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, JobFinding, RemediationJob
from groups.services.polls import cluster_record_failure
from groups.web.links import group_url
from tests.factories import (
    HOSTILE_GROUP_ID,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_topic,
)
from tests.harness.pages import client_for


def _polled(cluster: Cluster, *, ago: timedelta) -> None:
    moment = timezone.now() - ago
    Cluster.objects.filter(id=cluster.id).update(status=Cluster.Status.OK, last_poll_at=moment,
                                                 last_success_at=moment)


def test_it_shows_the_last_successful_poll_of_each_cluster_in_every_page_header(viewer_client, db):
    _polled(make_cluster("prod"), ago=timedelta(seconds=4))
    for path in ("/", "/jobs/", "/clusters/", "/audit/"):
        body = viewer_client.get(path).content.decode()
        header = re.search(r'<section id="freshness".*?</section>', body, re.S).group(0)
        assert 'data-cluster="prod"' in header and "polled" in header, path
        assert "4 s ago" in header or "5 s ago" in header, header
        assert 'class="banner"' not in body, path


def test_it_warns_on_every_page_when_a_cluster_is_unreachable_naming_its_last_success(viewer_client, db):
    cluster = make_cluster("prod")
    _polled(cluster, ago=timedelta(minutes=3))
    cluster_record_failure(cluster_id=cluster.id, error="KafkaError: <b>broker down</b>", now=timezone.now(),
                           kafka_seconds=0.1)
    body = viewer_client.get("/jobs/").content.decode()
    banner = re.search(r'<div class="banner" role="status">.*?</div>', body, re.S).group(0)
    assert "Cluster prod is unreachable" in banner
    assert "&lt;b&gt;broker down&lt;/b&gt;" in banner and "<b>" not in banner
    # The failed poll did not move the last success: still three minutes ago.
    assert "Last successful poll" in banner and "3 min ago" in banner


def test_it_warns_when_polls_run_late_and_not_for_a_disabled_cluster(viewer_client, settings, db):
    settings.POLL_INTERVAL_SECONDS = 10
    _polled(make_cluster("prod"), ago=timedelta(seconds=45))  # late after max(3 × 10 s, 30 s)
    _polled(make_cluster("stage", enabled=False), ago=timedelta(hours=2))
    _polled(make_cluster("test"), ago=timedelta(seconds=20))
    banner = re.search(r'<div class="banner".*?</div>', viewer_client.get("/").content.decode(), re.S).group(0)
    assert "Polls of cluster prod run late" in banner
    assert "stage" not in banner and "test" not in banner


def test_the_clusters_page_says_when_polls_take_longer_than_the_interval_or_were_skipped(viewer_client, settings, db):
    settings.POLL_INTERVAL_SECONDS = 10
    for name, duration, slow, skipped in (("big", 14_000, 3, 0), ("busy", 2_000, 0, 2), ("small", 900, 0, 0)):
        cluster = make_cluster(name)
        _polled(cluster, ago=timedelta(seconds=5))
        Cluster.objects.filter(id=cluster.id).update(last_poll_duration_ms=duration, slow_polls_total=slow,
                                                     skipped_polls_total=skipped)
    page = viewer_client.get("/clusters/").content.decode()
    rows = {name: re.search(rf'<tr id="cluster-{Cluster.objects.get(name=name).id}">.*?</tr>', page, re.S).group(0)
            for name in ("big", "busy", "small")}
    assert "the last took 14000 ms, the interval is 10000 ms; 3 slow, 0 skipped" in rows["big"]
    assert "2 skipped" in rows["busy"]
    assert "Polls run late" not in rows["small"]


def test_the_freshness_fragment_is_what_the_header_refreshes_from(viewer_client, client, db):
    _polled(make_cluster("prod"), ago=timedelta(seconds=2))
    body = viewer_client.get("/freshness").content.decode()
    assert 'data-cluster="prod"' in body and "<html" not in body
    assert client.get("/freshness").status_code == 302  # anonymous: to the login page


def test_a_user_without_a_role_sees_no_cluster_names(client, db):
    from tests.factories import user_with_role

    _polled(make_cluster("secret-cluster"), ago=timedelta(seconds=2))
    client.force_login(user_with_role("nobody", None))
    assert "secret-cluster" not in client.get("/").content.decode()


@pytest.fixture
def job(approver, db):
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "orders")
    group = make_group(cluster, HOSTILE_GROUP_ID)
    finding = make_finding(group, make_generation(topic, 2, (0, 1, 2)), 2)
    job = RemediationJob.objects.create(cluster=cluster, group=group, kind=RemediationJob.Kind.RESET,
                                        status=RemediationJob.Status.APPROVED, requested_by=approver,
                                        params={"target": "earliest", "value": None})
    job.findings.add(finding, through_defaults={"kind": job.kind})
    return job


def test_an_active_job_page_refreshes_itself_until_the_job_ends(approver, job):
    client = client_for(approver)
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert f'data-live-url="/jobs/{job.id}/live"' in page
    live = client.get(f"/jobs/{job.id}/live").content.decode()
    assert "approved" in live and "data-live-done" not in live and "<html" not in live

    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.SUCCEEDED,
                                                    finished_at=timezone.now())
    live = client.get(f"/jobs/{job.id}/live").content.decode()
    assert "succeeded" in live and "data-live-done" in live
    assert '<div id="job">' in client.get(f"/jobs/{job.id}/").content.decode()
    assert client.get("/jobs/999999/live").status_code == 404


def test_a_finding_page_refreshes_itself_while_a_job_works_on_it(approver, job):
    client = client_for(approver)
    finding = job.findings.get()
    assert f'data-live-url="/findings/{finding.id}/live"' in client.get(f"/findings/{finding.id}/").content.decode()
    live = client.get(f"/findings/{finding.id}/live").content.decode()
    assert f"reset #{job.id}" in live and "data-live-done" not in live and "<html" not in live
    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.SUCCEEDED)
    JobFinding.objects.filter(job=job).update(active=False)
    assert "data-live-done" in client.get(f"/findings/{finding.id}/live").content.decode()
    assert '<div id="finding">' in client.get(f"/findings/{finding.id}/").content.decode()
    assert client.get("/findings/999999/live").status_code == 404


def test_the_jobs_list_refreshes_while_a_job_on_it_is_active(approver, job):
    client = client_for(approver)
    assert 'data-live-url="/jobs/live?' in client.get("/jobs/").content.decode()
    assert "data-live-done" not in client.get("/jobs/live").content.decode()
    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.FAILED)
    assert '<div id="jobs-table">' in client.get("/jobs/").content.decode()
    assert "data-live-done" in client.get("/jobs/live").content.decode()


def test_a_filtered_jobs_list_says_how_many_jobs_the_filter_hid(approver, job):
    body = client_for(approver).get("/jobs/", {"status": "failed", "kind": "backfill"}).content.decode()
    assert "No jobs yet" not in body
    assert "No backfill jobs in state failed: the filter hides all 1 job" in body


def test_times_are_absolute_with_the_relative_time_beside_them_from_one_formatter(approver, job):
    RemediationJob.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(minutes=5))
    body = client_for(approver).get(f"/jobs/{job.id}/").content.decode()
    # In UTC from the server; gapwatch/times.js rewrites it in the viewer's zone (test_browser_console.py).
    moment = re.search(r'<time datetime="([^"]+)" data-when="s" title="([^"]+)"><span class="at">([^<]+)</span>'
                       r'<span class="ago"> \(5 min ago\)</span></time>', body)
    assert moment, body
    assert moment.group(2) == moment.group(3) and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", moment.group(3))
    assert moment.group(1).endswith("+00:00")
    assert 'src="/static/gapwatch/times.js"' in body
    # Every time on the page went through the formatter: none is written another way.
    assert not re.search(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d", re.sub(r"<time.*?</time>", "", body, flags=re.S))


def test_the_header_says_how_fresh_each_cluster_is_in_relative_time_with_the_absolute_one_for_screen_readers(
        viewer_client, db):
    _polled(make_cluster("prod"), ago=timedelta(minutes=3))
    header = re.search(r'<section id="freshness".*?</section>', viewer_client.get("/jobs/").content.decode(), re.S)
    assert re.search(r'<time datetime="[^"]+" data-when="ago" title="([^"]+ UTC)">3 min ago'
                     r'<span class="visually-hidden"> \(\1\)</span></time>', header.group(0)), header.group(0)


def test_a_reset_by_time_takes_an_iso_8601_date_time_on_the_page_and_in_the_api(approver, job):
    client = client_for(approver)
    finding = job.findings.get()
    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.FAILED)
    JobFinding.objects.filter(job=job).update(active=False)
    page = client.get("/findings/reset", {"ids": finding.id, "target": "timestamp", "value": "2026-11-25T07:44:00Z"})
    assert page.status_code == 200, page.content.decode()
    assert 'title="2026-11-25 07:44:00 UTC"' in page.content.decode()
    bad = client.get("/findings/reset", {"ids": finding.id, "target": "timestamp", "value": "yesterday"})
    assert bad.status_code == 400 and "is not an ISO 8601 date-time" in bad.content.decode()

    api = client.post(f"/api/v1/findings/{finding.id}/approve", {"kind": "reset", "target": "timestamp",
                      "value": "2026-11-25T08:44:00+01:00"}, content_type="application/json")
    assert api.status_code in (200, 201), api.content.decode()
    created = RemediationJob.objects.exclude(id=job.id).get()
    assert created.params["value"] == 1_795_592_640_000  # stored as epoch ms, whatever was typed
    text_offset = client.post(f"/api/v1/findings/{finding.id}/approve", {"kind": "reset", "target": "offset",
                              "value": "5"}, content_type="application/json")
    assert text_offset.status_code == 400 and text_offset.json()["parameter"] == "value"


@pytest.fixture
def findings(db):
    """billing: an open gap on orders[2], an open partly-expired one on
    orders[3], and a closed (dismissed, was pending) one on orders[4]."""
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2, 3, 4))
    group = make_group(cluster, "billing")
    return {
        "gap": make_finding(group, generation, 2, lag=10),
        "partly_expired": make_finding(group, generation, 3, lag=99, state=Finding.State.EXPIRED, expired=5),
        "closed": make_finding(group, generation, 4, state=Finding.State.PENDING, closed_at=timezone.now(),
                               resolution=Finding.Resolution.DISMISSED, closed_reason="test data"),
    }


def _header(body: str, label: str) -> str:
    return re.search(rf'<th aria-sort="[a-z]+"[^>]*><a [^>]*>{label}.*?</th>', body, re.S).group(0)


def test_sort_links_show_and_announce_the_order_in_force(viewer_client, findings):
    body = viewer_client.get("/", {"view": "partitions"}).content.decode()
    found = _header(body, "Found")
    assert 'aria-sort="descending"' in found and "▼" in found and "sort=-found" in found  # next click: oldest first
    assert 'aria-sort="none"' in _header(body, "Lag") and "▼" not in _header(body, "Lag")

    body = viewer_client.get("/", {"view": "partitions", "sort": "-found"}).content.decode()
    assert 'aria-sort="ascending"' in _header(body, "Found") and "▲" in _header(body, "Found")
    body = viewer_client.get("/", {"view": "partitions", "sort": "lag"}).content.decode()
    assert 'aria-sort="descending"' in _header(body, "Lag") and 'aria-sort="none"' in _header(body, "Found")
    rows = re.findall(r'data-finding="(\d+)"', body)
    assert rows == [str(findings["partly_expired"].id), str(findings["gap"].id)]  # largest lag first


def test_an_open_expired_state_and_the_expired_way_out_read_differently(viewer_client, findings):
    body = viewer_client.get("/", {"view": "partitions"}).content.decode()
    assert ">partly expired</span>" in body and "partly expired 1" in body
    history = viewer_client.get("/", {"view": "history"}).content.decode()
    assert "dismissed" in history and "was pending" in history
    page = viewer_client.get(f"/findings/{findings['partly_expired'].id}/").content.decode()
    assert ">partly expired</span>" in page


def test_empty_lists_say_how_much_their_filters_hid(viewer_client, findings):
    for view, expected in (("partitions", "they hide 2 open findings"), ("triage", "they hide 2 open findings"),
                           ("history", "they hide 3 findings")):
        body = viewer_client.get("/", {"view": view, "group": "nobody-reads-this"}).content.decode()
        assert expected in body and "show all" in body, view


def test_checkboxes_and_row_actions_are_named_by_what_they_act_on(approver, findings):
    body = client_for(approver).get("/", {"view": "partitions"}).content.decode()
    assert 'aria-label="select orders partition 2 of group billing"' in body
    assert 'aria-label="Reset orders partition 2 of group billing"' in body
    assert "select finding" not in body


def test_the_admin_lists_a_closed_finding_by_its_way_out_not_its_last_state(admin_client, findings):
    body = admin_client.get("/admin/groups/finding/").content.decode()
    assert "Dismissed (was pending)" in body and "open: gap" in body and "open: partly expired" in body
    assert 'field-state"' not in body  # the stored state is no column of its own


# --- Groups and topics lists; every partition on a group page (item 5) -------------------------------------------


def test_the_groups_and_topics_lists_search_page_and_escape(viewer_client, db):
    cluster, other = make_cluster("prod"), make_cluster("stage")
    topic = make_topic(cluster, "orders")
    hostile = make_group(cluster, HOSTILE_GROUP_ID)
    GroupTopic.objects.create(group=hostile, topic=topic, lag=7, first_seen_at=timezone.now(),
                              updated_at=timezone.now())
    for n in range(55):
        make_group(other, f"bulk-{n:02d}")
    body = viewer_client.get("/groups/", {"q": "<SCRIPT>"}).content.decode()  # part of the id, ignoring case
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert re.findall(r'data-group="(\d+)"', body) == [str(hostile.pk)]
    assert re.search(r'<td class="num">7</td>', body)  # its lag over its topics

    first = viewer_client.get("/groups/", {"cluster": "stage"}).content.decode()
    assert len(re.findall(r'data-group="', first)) == 50 and "page 1 of 2 · 55 in all" in first
    second = viewer_client.get("/groups/", {"cluster": "stage", "page": 2}).content.decode()
    assert len(re.findall(r'data-group="', second)) == 5 and "bulk-<wbr>54" in second

    empty = viewer_client.get("/groups/", {"q": "nothing-like-this"}).content.decode()
    assert "No group matches this search: it hides 56 groups" in empty

    topics = viewer_client.get("/topics/", {"q": "ORD"}).content.decode()
    assert re.findall(r'data-topic="(\d+)"', topics) == [str(topic.pk)]
    assert viewer_client.get("/topics/", {"q": "bad\x00"}).status_code == 400
    assert viewer_client.get("/groups/", {"q": "x" * 1001}).status_code == 400


def test_a_group_page_shows_every_partition_from_the_last_poll_with_owner_and_lag(viewer_client, db):
    from groups.domain.snapshot import GroupSnapshot, MemberSnapshot, PartitionOffsets, Snapshot, TopicSnapshot
    from groups.services.polls import poll_record_success

    cluster = make_cluster("prod")
    now = timezone.now()
    member = MemberSnapshot(member_id="m-1", client_id="<b>client</b>", host="/10.0.0.7",
                            assignment=frozenset({("orders", 0), ("orders", 2)}))
    group = GroupSnapshot(group_id="billing", state="Stable", type="classic", assignor="range", members=(member,),
                          committed={("orders", 0): 90, ("orders", 1): 40})
    orders = TopicSnapshot(name="orders", topic_id="t-1", is_internal=False, partitions=(
        PartitionOffsets(0, None, 100), PartitionOffsets(1, 10, 50), PartitionOffsets(2, 5, 30)))
    poll_record_success(cluster_id=cluster.id, snapshot=Snapshot(cluster="prod", taken_at=now, topics=(orders,),
                        groups=(group,)), now=now, kafka_seconds=0.01)

    stored = ConsumerGroup.objects.get(group_id="billing")
    body = viewer_client.get(group_url(stored)).content.decode()
    rows = dict(re.findall(r'<tr class="partition-row" data-partition="(\d)">(.*?)</tr>', body, re.S))
    assert sorted(rows) == ["0", "1", "2"]  # every partition, none has a finding
    cells = {p: re.findall(r'<td class="num">([^<]*)</td>', row) for p, row in rows.items()}
    assert cells["0"] == ["90", "100", "10"]  # committed, high watermark, lag
    assert cells["1"] == ["40", "50", "10"]   # nobody owns it
    assert cells["2"] == ["none", "30", "25"]  # no commit: lag from the log start, never 0
    assert "&lt;b&gt;client&lt;/b&gt;" in rows["0"] and "nobody" in rows["1"]
    assert "45" in re.search(r'<tr class="topic-row">.*?</tr>', body, re.S).group(0)  # the topic's total lag


def test_the_lag_chart_fits_its_events_labels_them_and_gives_each_value(viewer_client, db):
    from groups.models import LagSample, PartitionGeneration

    now = timezone.now()
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "orders")
    group = make_group(cluster, "billing")
    GroupTopic.objects.create(group=group, topic=topic, lag=3, first_seen_at=now, updated_at=now)
    generation = make_generation(topic, 2, (0, 1, 2))
    PartitionGeneration.objects.filter(id=generation.id).update(observed_at=now - timedelta(minutes=20),
                                                                 added_partitions=[2])
    make_finding(group, generation, 2, missed_definite=72, missed_possible=1,
                 pickup_before=now - timedelta(minutes=10))
    LagSample.objects.bulk_create([LagSample(group=group, topic=topic, at=now - timedelta(minutes=m), lag=m)
                                   for m in (180, 24, 15, 5)])

    body = viewer_client.get(group_url(group)).content.decode()
    assert "last 25 min, fitted to its events" in body  # 20 min since the partition was added, and 5 before
    svg = body[body.index("<svg"):body.index("</svg>")]
    assert "orders: partition 2 added</text>" in svg
    assert "orders[2] picked up by the group: 72 missed, 1 possibly" in svg
    # The samples inside the window, each with its value on hover and in the table; the one 3 h ago is outside.
    assert len(re.findall(r'<circle class="dot"', svg)) == 3 and "orders: lag 15 at " in svg
    table = body[body.index('<details class="chart-values">'):body.index("</details>")]
    assert len(re.findall(r"<tr><td", table)) == 3

    fixed = viewer_client.get(group_url(group), {"window": "24h"}).content.decode()
    assert "last 24h" in fixed and len(re.findall(r'<circle class="dot"', fixed)) == 4


def test_a_long_triage_is_paged_by_group_with_each_clusters_totals(viewer_client, db):
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2))
    for n in range(55):
        make_finding(make_group(cluster, f"g-{n:02d}", state="Empty", member_count=0), generation, 2,
                     missed_definite=100 + n)
    first = viewer_client.get("/").content.decode()
    assert first.count('class="triage-group') == 50 and "groups 1–50 of 55" in first
    assert "6985 definitely missed" in first  # the cluster's total over all 55 groups (100 + … + 154)
    second = viewer_client.get("/", {"page": 2}).content.decode()
    assert second.count('class="triage-group') == 5 and "groups 51–55 of 55" in second
    assert "g-<wbr>54" in first and "g-<wbr>00" in second and "g-<wbr>00" not in first  # the largest loss (g-54) first


def test_a_time_zone_not_offered_is_a_400_that_says_so_and_changes_nothing(approver):
    from groups.models import PersonSettings

    client = client_for(approver)
    assert client.post("/account/time-zone", {"time_zone": "Europe/Berlin"}).status_code == 302
    refused = client.post("/account/time-zone", {"time_zone": "Mars/Olympus_Mons<b>"})
    assert refused.status_code == 400
    assert "“Mars/Olympus_Mons&lt;b&gt;” is not a time zone" in refused.content.decode()
    assert PersonSettings.objects.get(user=approver).time_zone == "Europe/Berlin"
    assert 'data-time-zone="Europe/Berlin"' in client.get("/").content.decode()
    assert client.get("/account/time-zone").status_code == 405


def test_the_color_scheme_a_person_chooses_is_the_layouts_and_anything_else_is_a_400(approver):
    from groups.models import PersonSettings

    client = client_for(approver)
    # Before any choice: the system's, the dark palette only where the browser prefers dark.
    layout = client.get("/").content.decode()
    assert '<meta name="color-scheme" content="light dark">' in layout
    assert 'gapwatch-dark.css" media="(prefers-color-scheme: dark)">' in layout
    assert client.post("/account/color-scheme", {"color_scheme": "dark"}).status_code == 302
    layout = client.get("/").content.decode()
    assert '<meta name="color-scheme" content="dark">' in layout and 'gapwatch-dark.css">' in layout
    refused = client.post("/account/color-scheme", {"color_scheme": "<b>sepia</b>"})
    assert refused.status_code == 400 and "“&lt;b&gt;sepia&lt;/b&gt;” is not a color scheme" in refused.content.decode()
    assert PersonSettings.objects.get(user=approver).color_scheme == "dark"
    assert client.post("/account/color-scheme", {"color_scheme": "light"}).status_code == 302
    layout = client.get("/").content.decode()
    assert '<meta name="color-scheme" content="light">' in layout and "gapwatch-dark.css" not in layout
    assert client.get("/account/color-scheme").status_code == 405
