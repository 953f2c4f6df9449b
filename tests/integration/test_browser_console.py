"""The operator's console in a real headless Chromium (issue 22): the triage
puts the live group with a definite loss first and shows covered findings as
good news without repair buttons; a finding page's repair links lead to the
previews; the interactive API docs render from this server's own files under
the Content-Security-Policy. Rows come from the ORM factories (the flow on a
real Kafka scenario is in test_browser_dashboard.py)."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from groups.models import Finding
from tests.factories import HOSTILE_GROUP_ID, make_cluster, make_finding, make_generation, make_group, make_topic
from tests.harness.browser import ARTIFACTS, OPERATOR_PASSWORD, approver_operator, axe_violations, log_in


@pytest.fixture
def console(db, live_server, page):
    operator = approver_operator()
    prod = make_cluster("prod")
    generation = make_generation(make_topic(prod, "orders"), 2, (0, 1, 2, 3))
    covered = make_group(prod, "aa-covered", state="Stable", member_count=1)
    empty = make_group(prod, "aa-empty", state="Empty", member_count=0)
    live = make_group(prod, HOSTILE_GROUP_ID, state="Stable", member_count=2)
    findings = {
        "covered": make_finding(covered, generation, 2, state=Finding.State.COVERED, missed_definite=0,
                                missed_possible=0, backfill_start=None, backfill_end=None),
        "empty": make_finding(empty, generation, 2, missed_definite=500, committed_offset=520, backfill_end=520,
                              missed_possible=20),
        "live": make_finding(live, generation, 3, high_watermark=1000, committed_offset=600, missed_definite=30,
                             missed_possible=10),
    }
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    yield findings
    assert dialogs == []  # no script from a group id ever ran


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_triage_puts_the_live_loss_first_and_covered_last_without_buttons(console, live_server, page):
    cards = page.locator("article.triage-group")
    assert cards.count() == 3
    assert cards.nth(0).locator("h3 a.group-id").inner_text() == HOSTILE_GROUP_ID
    assert cards.nth(0).locator("h3 .pill").inner_text() == "2 live members"
    assert cards.nth(1).locator("h3 a.group-id").inner_text() == "aa-empty"
    covered = cards.nth(2)
    assert covered.locator(".good-news").first.inner_text().startswith("Covered: the group read its new partition")
    for name in ("Reset", "Backfill", "Dismiss"):
        assert covered.get_by_role("link", name=name).count() == 0, name
        assert covered.get_by_role("button", name=name).count() == 0, name
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "console-triage.png"), full_page=True)

    # The live group's recommended repair (a reset would re-deliver 600 for 40) opens the backfill preview.
    cards.nth(0).locator("p.recommendation a.button").click()
    page.wait_for_url(f"**/findings/backfill?ids={console['live'].id}")
    assert page.locator("p.backfill-total").inner_text().startswith("40 offsets to replay: 30 certainly missed")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_finding_page_leads_to_each_repair_preview(console, live_server, page):
    finding = console["empty"]
    page.goto(f"{live_server.url}/findings/{finding.id}/")
    assert page.locator("h1").inner_text() == "orders[2] missed by aa-empty"
    assert page.locator("p.recommendation").inner_text().startswith("Recommended: reset — the group is empty")
    page.screenshot(path=str(ARTIFACTS / "console-finding.png"), full_page=True)
    page.locator('tr[data-option="reset"] a', has_text="Preview").click()
    page.wait_for_url("**/findings/reset?*")
    assert page.get_by_role("button", name="Approve reset").is_visible()
    page.go_back()
    page.locator('tr[data-option="backfill"] a', has_text="Preview").click()
    page.wait_for_url("**/findings/backfill?*")
    assert page.get_by_role("button", name="Approve backfill").is_visible()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_api_docs_render_from_local_files_under_the_csp(console, live_server, page):
    requests: list[str] = []
    violations: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    response = page.goto(f"{live_server.url}/api/v1/docs")
    assert response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    # Swagger UI fetched the schema (behind the login) and rendered the operations.
    page.wait_for_selector("text=One finding, open or closed")
    assert page.locator(".opblock").count() >= 8
    assert requests and all(url.startswith(live_server.url) for url in requests), requests
    assert violations == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_selection_across_groups_is_dismissed_with_one_reason(console, live_server, page):
    chosen = [console["live"].id, console["empty"].id]  # two groups, one of them hostile
    page.goto(f"{live_server.url}/?view=partitions")
    for finding_id in chosen:
        page.check(f'input[name=ids][value="{finding_id}"]')
    page.get_by_role("button", name="Dismiss…").click()
    page.wait_for_url("**/findings/dismiss?*")
    assert page.locator("table.dismiss-selection tbody tr").count() == 2
    page.fill("textarea[name=reason]", "replayed by hand")
    page.get_by_role("button", name="Dismiss 2 findings").click()
    page.wait_for_url(f"{live_server.url}/?view=partitions")
    assert page.locator(".messages li").first.inner_text() == (
        f"Dismissed 2 of 2 findings: {', '.join(map(str, sorted(chosen)))}.")
    assert Finding.objects.filter(id__in=chosen, resolution="dismissed").count() == 2
    assert page.locator("tr[data-finding]").count() == 1  # the covered one is still open work


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_covered_finding_page_says_why_and_offers_nothing_about_missed_records(console, live_server, page):
    page.goto(f"{live_server.url}/findings/{console['covered'].id}/")
    assert page.locator("h1").inner_text() == "orders[2] read in full by aa-covered"
    assert page.locator("p.covered-why").inner_text().startswith("Covered: the group missed nothing")
    assert page.get_by_role("link", name="Look at the missed records…").count() == 0
    assert page.get_by_text("missed by").count() == 0
    assert axe_violations(page) == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("zone", "zone_name"), [
    # Chromium's short names (en-US): Berlin by its offset, New York by its abbreviation.
    ("Europe/Berlin", lambda moment: f"GMT+{int(moment.utcoffset().total_seconds() // 3600)}"),
    ("America/New_York", lambda moment: moment.tzname()),
], ids=["berlin", "new-york"])
def test_times_are_shown_in_the_viewers_time_zone_with_utc_on_hover(console, live_server, chromium, zone, zone_name):
    found_at = (timezone.now() - timedelta(days=3)).replace(microsecond=0)
    Finding.objects.filter(id=console["live"].id).update(created_at=found_at)
    there = found_at.astimezone(ZoneInfo(zone))
    context = chromium.new_context(timezone_id=zone)
    try:
        page = context.new_page()
        log_in(page, live_server, "operator", OPERATOR_PASSWORD)
        page.goto(f"{live_server.url}/findings/{console['live'].id}/")
        found = page.locator("p.finding-state time").nth(0)
        assert found.locator(".at").inner_text() == f"{there:%Y-%m-%d %H:%M:%S} {zone_name(there)}"
        assert found.get_attribute("title") == f"{found_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        assert found.locator(".ago").inner_text() == " (3 d ago)"
        # The timeline's evidence keeps its milliseconds in the viewer's zone too.
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+",
                            page.locator("ol.pickup time .at").first.inner_text())
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_wrong_address_gets_gapwatchs_not_found_page_with_navigation_only_once_logged_in(live_server, page):
    # The live server answers with DEBUG off, as `make up` runs: never Django's page listing the URLs.
    response = page.goto(f"{live_server.url}/topics/no-such-topic/")
    assert response.status == 404
    assert page.locator("h1").inner_text() == "Not found"
    assert page.get_by_role("navigation", name="main").count() == 0
    assert "URLconf" not in page.content()
    assert axe_violations(page) == []

    operator = approver_operator()
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    response = page.goto(f"{live_server.url}/topics/no-such-topic/")
    assert response.status == 404
    assert page.get_by_role("navigation", name="main").get_by_role("link", name="Topics").is_visible()
    assert axe_violations(page) == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_person_chooses_the_time_zone_times_are_shown_in(console, live_server, chromium):
    found_at = (timezone.now() - timedelta(days=3)).replace(microsecond=0)
    Finding.objects.filter(id=console["live"].id).update(created_at=found_at)
    context = chromium.new_context(timezone_id="Europe/Berlin")
    try:
        page = context.new_page()
        log_in(page, live_server, "operator", OPERATOR_PASSWORD)

        def shown() -> str:
            page.goto(f"{live_server.url}/findings/{console['live'].id}/")
            return page.locator("p.finding-state time .at").first.inner_text()

        berlin = found_at.astimezone(ZoneInfo("Europe/Berlin"))
        assert shown() == f"{berlin:%Y-%m-%d %H:%M:%S} GMT+{int(berlin.utcoffset().total_seconds() // 3600)}"
        page.goto(f"{live_server.url}/account/tokens/")
        page.select_option("#time-zone-choice", "Asia/Tokyo")
        page.get_by_role("button", name="Save").click()
        page.wait_for_load_state("load")
        assert page.locator("ul.messages").inner_text() == "Times are shown in Asia/Tokyo."
        assert axe_violations(page) == []
        assert shown() == f"{found_at.astimezone(ZoneInfo('Asia/Tokyo')):%Y-%m-%d %H:%M:%S} GMT+9"
        page.goto(f"{live_server.url}/account/tokens/")
        page.select_option("#time-zone-choice", "")  # back to the browser's
        page.get_by_role("button", name="Save").click()
        page.wait_for_load_state("load")
        assert shown().endswith(f"GMT+{int(berlin.utcoffset().total_seconds() // 3600)}")
    finally:
        context.close()
