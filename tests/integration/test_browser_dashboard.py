"""An operator in a real headless Chromium, on data from a real Kafka scenario:
log in, find the group on the triage, open the finding by keyboard and read
its explanation, see the new partition with its exact missed count, open the reset
preview, approve a backfill, find the job on the jobs page. The group id is
hostile markup, created as a real consumer group on the broker.

Screenshots are saved under .gapwatch/test-artifacts/ for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from groups.models import Cluster, Finding, RemediationJob
from tests.harness.browser import ARTIFACTS, OPERATOR_PASSWORD, approver_operator, log_in
from tests.harness.scenarios import K, gap_scenario


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_operator_finds_the_gap_previews_a_reset_and_approves_a_backfill(page, live_server, broker, unique):
    operator = approver_operator()
    cluster = Cluster.objects.create(name="local", bootstrap_servers=broker.bootstrap)
    topic, group_id = f"orders-{unique}", f"<script>alert('{unique}')</script>"
    gap_scenario(broker, cluster, topic, group_id)
    finding = Finding.objects.get(topic__name=topic, partition=2, closed_at__isnull=True)
    assert finding.missed_definite == K

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dialogs: list[str] = []
    page.set_viewport_size({"width": 1500, "height": 900})
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)

    # The home page triages: the group's card, its id as text, its loss and the repair to start from.
    card = page.locator(f'article[data-group="{finding.group_id}"]')
    assert card.locator("h3 a.group-id").inner_text() == group_id
    assert card.locator("p.totals strong.missed").inner_text() == str(finding.missed_definite)
    assert card.locator("p.recommendation").is_visible()
    page.screenshot(path=str(ARTIFACTS / "0-triage.png"), full_page=True)
    # Keyboard only: Tab to the finding's link, Enter opens its page with the explanation as text.
    link = f"/findings/{finding.id}/"
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href')") == link:
            break
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{link}")
    explanation = page.locator("p.explanation")
    assert explanation.is_visible() and f"{K} definitely missed" in explanation.inner_text()
    assert page.locator("dd.definite").inner_text().startswith(f"{K} offsets")
    page.screenshot(path=str(ARTIFACTS / "0-finding.png"), full_page=True)

    page.goto(f"{live_server.url}/")
    page.click("text=By partition")
    page.wait_for_url("**/?view=partitions")
    row = page.locator(f'tr[data-finding="{finding.id}"]')
    assert row.locator("a.group-id").inner_text() == group_id  # shown as text, not run
    assert row.locator("td.missed").inner_text().startswith(f"{K} / ")
    assert row.locator(".pill").inner_text() == "gap"
    page.screenshot(path=str(ARTIFACTS / "1-new-partitions.png"), full_page=True)

    row.locator("a", has_text="Reset").click()
    page.wait_for_url("**/findings/reset?ids=*")
    assert page.locator("text=Approve reset").is_visible()
    planned = page.locator("table tbody tr td strong").first.inner_text()
    assert planned == str(finding.log_start_offset)
    page.screenshot(path=str(ARTIFACTS / "2-reset-preview.png"), full_page=True)

    page.goto(f"{live_server.url}/findings/backfill?ids={finding.id}")
    # Total records, then how many are certain losses and how many possibly duplicates.
    assert page.locator("tfoot th.num").all_inner_texts() == [
        str(finding.backfill_end - finding.backfill_start), str(finding.missed_definite),
        str(finding.missed_possible)]
    page.click("text=Approve backfill")
    page.wait_for_url("**/jobs/*/")
    page.screenshot(path=str(ARTIFACTS / "3-job.png"), full_page=True)

    page.goto(f"{live_server.url}/jobs/")
    job = RemediationJob.objects.get()
    job_row = page.locator("tbody tr", has_text=f"#{job.id}")
    assert job_row.locator("td.group-id").inner_text() == group_id
    assert job_row.locator("td", has_text="backfill").count() == 1
    page.screenshot(path=str(ARTIFACTS / "4-jobs.png"), full_page=True)
    assert dialogs == []  # no script from a group id ever ran
    assert (job.kind, job.approved_by, job.plan[0]["end"]) == ("backfill", operator, finding.backfill_end)
    assert Path(ARTIFACTS / "4-jobs.png").stat().st_size > 0
