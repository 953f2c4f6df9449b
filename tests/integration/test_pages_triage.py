"""The home page's triage and the finding page (issue 22, items 1 and 2),
with Django's client against real PostgreSQL: order, totals, recommendations,
covered as good news, the flat table one click away, the evidence in words,
repair options with their numbers, the audit trail, bad ids and hostile text."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from groups.models import AuditEvent, Finding
from tests.harness.pages import approve, client_for
from groups.services.audit import audit_record
from tests.factories import (
    HOSTILE_GROUP_ID,
    NOW,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_topic,
    user_with_role,
)


@pytest.fixture
def work(db):
    """prod/orders generation 2 added partitions 2 and 3; four groups read it:
    a live group with a small definite loss (hostile id), an empty group with a
    big one whose reset would re-deliver little, a live group with only a
    possible loss, and a covered group."""
    prod = make_cluster("prod")
    orders = make_topic(prod, "orders")
    generation = make_generation(orders, 2, (0, 1, 2, 3))
    live = make_group(prod, HOSTILE_GROUP_ID, state="Stable", member_count=2, members=[
        {"member_id": "m-1", "client_id": "<b>client-1</b>", "host": "/10.0.0.1", "assignment": [["orders", 2]]},
        {"member_id": "m-2", "client_id": "client-2", "host": "/10.0.0.2", "assignment": [["orders", 0]]},
    ])
    empty = make_group(prod, "aa-batch", state="Empty", member_count=0)
    maybe = make_group(prod, "bb-maybe", state="Stable", member_count=1)
    covered = make_group(prod, "aa-covered", state="Stable", member_count=1)
    return {
        # Committed 600: a reset to earliest re-delivers 600 for 40 missed -> backfill.
        "live_2": make_finding(live, generation, 2, high_watermark=1000, committed_offset=600, backfill_end=40,
                               missed_definite=30, missed_possible=10, pre_pickup_high_watermark=30,
                               first_commit=40, pickup_after=NOW - timedelta(seconds=1, milliseconds=250),
                               pickup_before=NOW - timedelta(seconds=1), likely_start=35,
                               likely_start_evidence="time index (CreateTime)",
                               explanation="policy not declared, assumed latest: 30 definitely missed [0, 30), "
                                           "10 possibly missed [30, 40)"),
        "live_3": make_finding(live, generation, 3, high_watermark=900, committed_offset=500, missed_definite=5,
                               missed_possible=0),
        # Committed 500 for 500 missed: few duplicates, the group is empty -> reset.
        "empty": make_finding(empty, generation, 2, high_watermark=600, committed_offset=500, missed_definite=450,
                              missed_possible=50, backfill_end=500),
        "maybe": make_finding(maybe, generation, 2, missed_definite=0, missed_possible=20),
        "covered": make_finding(covered, generation, 2, state=Finding.State.COVERED, missed_definite=0,
                                missed_possible=0, backfill_start=None, backfill_end=None,
                                explanation="first commit 3 is below 30: the group did not start at latest"),
    }


def group_order(body: str) -> list[str]:
    return re.findall(r'<article class="triage-group rank-(\d)" data-group="(\d+)"', body)


def article(body: str, group_pk: int) -> str:
    return re.search(rf'<article [^>]*data-group="{group_pk}".*?</article>', body, re.S).group(0)


def test_it_triages_open_work_live_groups_with_definite_loss_first(approver, viewer, work):
    body = client_for(approver).get("/").content.decode()
    order = [(int(rank), int(pk)) for rank, pk in group_order(body)]
    assert order == [(0, work["live_2"].group_id), (1, work["empty"].group_id), (2, work["maybe"].group_id),
                     (3, work["covered"].group_id)]
    live = article(body, work["live_2"].group_id)
    # Totals over both partitions of the live group: 35 definite, 10 possible, 2 partitions.
    assert "<strong class=\"missed\">35</strong> definitely missed · <strong>10</strong> possibly missed · " \
           "2 partitions" in live
    assert "2 live members" in live
    ids = f"{work['live_2'].id},{work['live_3'].id}"
    assert f'href="/findings/backfill?ids={ids}">Backfill 2 partitions…</a>' in live
    assert "a reset would re-deliver 1100 offsets to recover at most 45" in live
    empty = article(body, work["empty"].group_id)
    assert f'href="/findings/reset?ids={work["empty"].id}">Reset 1 partition…</a>' in empty
    assert "the group is empty" in empty
    # A viewer reads the same recommendation, without the buttons that act on it.
    seen = article(client_for(viewer).get("/").content.decode(), work["live_2"].group_id)
    assert "<strong>backfill 2 partitions</strong>" in seen and "/findings/backfill" not in seen
    assert "a reset would re-deliver 1100 offsets to recover at most 45" in seen


def test_covered_findings_are_good_news_without_repair_buttons(approver, work):
    body = client_for(approver).get("/").content.decode()
    covered = article(body, work["covered"].group_id)
    assert "Covered: the group read its new partition from the start. Nothing to repair." in covered
    assert "covered: nothing to repair" in covered
    for button in ("/findings/reset", "/findings/backfill", "/dismiss", "Reset", "Backfill", "Dismiss"):
        assert button not in covered, button
    # The finding itself stays one click away.
    assert f'href="/findings/{work["covered"].id}/"' in covered


def test_hostile_group_ids_and_client_ids_are_shown_escaped(viewer, work):
    client = client_for(viewer)
    for path in ("/", f"/findings/{work['live_2'].id}/", "/findings/triage"):
        body = client.get(path).content.decode()
        assert HOSTILE_GROUP_ID not in body and "<b>client-1</b>" not in body, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body, path


def test_the_flat_table_is_one_click_away_and_links_each_finding(viewer, work):
    client = client_for(viewer)
    assert '<a href="/?view=partitions">By partition</a>' in client.get("/").content.decode()
    flat = client.get("/", {"view": "partitions"}).content.decode()
    assert flat.count('<tr data-finding="') == 5
    assert f'<a href="/findings/{work["empty"].id}/"' in flat
    # Covered: nothing to repair, so no Reset or Backfill in its row.
    row = re.search(rf'<tr data-finding="{work["covered"].id}".*?</tr>', flat, re.S).group(0)
    assert "nothing to repair" in row and "/findings/reset" not in row and "/findings/backfill" not in row
    # Sorting keeps the flat view.
    assert 'href="?view=partitions&sort=lag"' in flat


def test_it_filters_the_triage_and_says_what_the_filter_hid(viewer, work):
    client = client_for(viewer)
    body = client.get("/", {"group": "aa-"}).content.decode()
    assert [int(pk) for _, pk in group_order(body)] == [work["empty"].group_id, work["covered"].group_id]
    none = client.get("/", {"topic": "nothing-like-it"}).content.decode()
    assert "No open findings match these filters" in none


def test_the_triage_reads_in_a_few_queries_whatever_the_number_of_findings(viewer, work,
                                                                           django_assert_max_num_queries):
    client = client_for(viewer)
    client.get("/findings/triage")
    group, generation = work["maybe"].group, work["maybe"].generation
    for partition in range(10, 30):
        make_finding(group, generation, partition)
    # 9: the page's, and the person's team scope (their directory identity).
    with django_assert_max_num_queries(9) as few:
        client.get("/findings/triage")
    for partition in range(30, 200):
        make_finding(group, generation, partition)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get("/findings/triage").status_code == 200


def test_the_finding_page_shows_the_evidence_in_words_and_numbers(viewer, work):
    finding = work["live_2"]
    audit_record(action="finding.state_changed", cluster=finding.cluster, object_type="finding",
                 object_id=finding.id, detail={"from": "undecided", "to": "gap"})
    # A row a poll wrote before rows named their finding: matched by group, topic, partition and generation.
    audit_record(action="finding.created", cluster=finding.cluster, detail={
        "group": HOSTILE_GROUP_ID, "topic": "orders", "partition": 2, "generation": 2, "to": "pending"})
    audit_record(action="finding.created", cluster=finding.cluster, detail={
        "group": HOSTILE_GROUP_ID, "topic": "orders", "partition": 3, "generation": 2, "to": "pending"})
    body = client_for(viewer).get(f"/findings/{finding.id}/").content.decode()
    # The explanation is text on the page, not a tooltip.
    assert '<p class="explanation">policy not declared, assumed latest: 30 definitely missed [0, 30), ' \
           '10 possibly missed [30, 40)</p>' in body
    assert "30 offsets [0, 30)" in body and "10 offsets [30, 40)" in body
    assert "Likely start <span class=\"muted\">(an estimate)</span>" in body
    assert "offset 35 — evidence: time index (CreateTime)." in body
    assert "the group took the partition within 0.250 s" in body
    # Members: the holder of partition 2 first, its client id escaped.
    assert re.search(r"&lt;b&gt;client-1&lt;/b&gt;.*?<strong>yes</strong>.*?client-2.*?<td[^>]*>no</td>", body.replace("<wbr>", ""), re.S)
    # Repairs with what each delivers and re-delivers, linking to their previews.
    reset = re.search(r'<tr data-option="reset">.*?</tr>', body, re.S).group(0)
    assert re.findall(r'<td data-label="[^"]+" class="num">([^<]*)</td>', reset) == ["from 0", "up to 40", "30", "10", "600"]
    assert f'/findings/reset?ids={finding.id}&amp;target=earliest' in reset
    bound = re.search(r'<tr data-option="backfill">.*?</tr>', body, re.S).group(0)
    assert re.findall(r'<td data-label="[^"]+" class="num">([^<]*)</td>', bound) == ["[0, 40)", "40", "30", "10", "at most 10"]
    likely = re.search(r'<tr data-option="backfill-likely">.*?</tr>', body, re.S).group(0)
    assert re.findall(r'<td data-label="[^"]+" class="num">([^<]*)</td>', likely) == ["[0, 35)", "35", "30", "5", "at most 5"]
    assert f'/findings/backfill?ids={finding.id}&amp;until=likely' in likely
    assert "<strong>Recommended:</strong>\n  backfill — a reset would re-deliver 600 offsets" in body
    # The audit trail: the named row and the older unnamed one of this partition, not partition 3's.
    trail = re.search(r'<table class="audit stack" tabindex="0">.*?</table>', body, re.S).group(0)
    assert trail.count("<code>finding.") == 2
    assert '<dt>partition</dt><dd class="hostile">2</dd>' in trail
    assert '<dt>partition</dt><dd class="hostile">3</dd>' not in trail


def test_a_covered_finding_page_offers_no_repair(approver, work):
    body = client_for(approver).get(f"/findings/{work['covered'].id}/").content.decode()
    assert "nothing — covered" in body
    assert 'class="repair-options' not in body and "/findings/reset" not in body
    assert f'/findings/{work["covered"].id}/dismiss' in body  # an approver may still close it


def test_a_covered_finding_says_why_and_never_that_anything_was_missed(approver, work):
    covered = work["covered"]
    Finding.objects.filter(id=covered.id).update(
        pre_pickup_high_watermark=30, first_commit=3, pickup_after=NOW - timedelta(seconds=2),
        pickup_before=NOW - timedelta(seconds=1))
    body = client_for(approver).get(f"/findings/{covered.id}/").content.decode()
    title = re.search(r"<h1>(.*?)</h1>", body, re.S).group(1)
    assert "orders[2] read in full by" in title and "missed by" not in title
    assert "Covered: the group missed nothing of this partition, so there is nothing to repair." in body
    assert "Why: first commit 3 is below 30: the group did not start at latest" in body
    assert "the end was 30; a group starting at the end would have missed everything below it, " \
           "but this one missed nothing" in body
    assert "everything below it was missed" not in body
    assert "Look at the missed records" not in body and f"/findings/{covered.id}/records" not in body


def test_a_finding_with_a_loss_is_titled_missed_and_offers_its_records(approver, work):
    body = client_for(approver).get(f"/findings/{work['live_2'].id}/").content.decode()
    assert re.search(r"<h1>orders\[2\] missed by", body)
    assert "the end was 30, so everything below it was missed" in body
    assert "Look at the missed records" in body and "Covered:" not in body


@pytest.mark.parametrize("path", ["/findings/abc/", "/findings/999999/", "/findings/-1/", "/findings/1e3/"])
def test_a_bad_or_unknown_finding_id_is_a_404_never_a_500(viewer, work, path):
    assert client_for(viewer).get(path).status_code == 404


def test_the_finding_page_needs_a_login_and_a_role(client, work):
    response = client.get(f"/findings/{work['empty'].id}/")
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    assert client_for(user_with_role("nobody", None)).get(f"/findings/{work['empty'].id}/").status_code == 403


def test_a_closed_finding_page_says_how_it_closed(viewer, work):
    Finding.objects.filter(id=work["empty"].id).update(resolution="dismissed", closed_at=NOW,
                                                       closed_reason="known & accepted <loss>")
    AuditEvent.objects.all().delete()
    body = client_for(viewer).get(f"/findings/{work['empty'].id}/").content.decode()
    assert "Closed: known &amp; accepted &lt;loss&gt;" in body and 'class="repair-options' not in body
    assert "No audit rows about this finding." in body


def test_the_backfill_preview_and_its_job_split_records_into_certain_and_possible(approver, work):

    client = client_for(approver)
    finding = work["live_2"]
    body = client.get("/findings/backfill", {"ids": finding.id, "sink": "parquet"}).content.decode()
    assert "<strong>40</strong> offsets to replay:\n  <strong>30</strong> certainly missed and " \
           "<strong>10</strong>\n  possibly missed" in body
    job_page = client.get(approve(client, "backfill", {"ids": finding.id, "sink": "parquet"}).url).content.decode()
    plan = re.search(r"<h2>Plan</h2>.*?</table>", job_page, re.S).group(0)
    # start, end, records, certainly missed, possibly duplicates
    assert re.findall(r'<td data-label="[^"]+" class="num">(\d+)</td>', plan)[1:] == ["0", "40", "40", "30", "10"]
