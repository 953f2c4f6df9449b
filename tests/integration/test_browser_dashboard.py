"""An operator in a real headless Chromium, on data from a real Kafka scenario:
log in, see the new partition with its exact missed count, open the reset
preview, approve a backfill, find the job on the jobs page. The group id is
hostile markup, created as a real consumer group on the broker.

Screenshots are saved under .gapwatch/test-artifacts/ for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from groups.models import Cluster, Finding, RemediationJob
from groups.roles import ensure_roles
from tests.conftest import ROOT
from tests.integration.kafka_harness import GroupConsumer, wait_until
from tests.integration.test_browser_login import CHROMIUM, CHROMIUM_ARGS
from tests.integration.test_detection import K, findings, poll, produce_one_each, start_consuming_group

ARTIFACTS = ROOT / ".gapwatch" / "test-artifacts"


def gap_scenario(broker, cluster, topic: str, group_id: str) -> None:
    """A latest group misses K messages on new partition 2 (DESIGN section 1)."""
    broker.create_topic(topic, 2)
    consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    consumer.close()
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: consumer.assigned == {0, 1, 2}, what="new partition assigned")
        wait_until(lambda: produce_one_each(broker, topic, [2]) and consumer.count(2), interval=0.5,
                   what="the group reading partition 2")
        wait_until(lambda: poll(cluster) and findings(topic, group_id)[2].state == "gap", interval=0.5,
                   what="the finding to turn gap")
    finally:
        consumer.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_operator_finds_the_gap_previews_a_reset_and_approves_a_backfill(live_server, broker, unique):
    from playwright.sync_api import sync_playwright

    ensure_roles()
    operator = User.objects.create_user("operator", password="correct horse battery")
    operator.groups.add(Group.objects.get(name="approver"))
    cluster = Cluster.objects.create(name="local", bootstrap_servers=broker.bootstrap)
    topic, group_id = f"orders-{unique}", f"<script>alert('{unique}')</script>"
    gap_scenario(broker, cluster, topic, group_id)
    finding = Finding.objects.get(topic__name=topic, partition=2, closed_at__isnull=True)
    assert finding.missed_definite == K

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dialogs: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        try:
            page.goto(f"{live_server.url}/")
            page.fill("input[name=username]", "operator")
            page.fill("input[name=password]", "correct horse battery")
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/")

            row = page.locator(f'tr[data-finding="{finding.id}"]')
            assert row.locator("td.group-id").inner_text() == group_id  # shown as text, not run
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
            assert page.locator("tfoot th.num").inner_text() == str(finding.backfill_end - finding.backfill_start)
            page.click("text=Approve backfill")
            page.wait_for_url("**/jobs/*/")
            page.screenshot(path=str(ARTIFACTS / "3-job.png"), full_page=True)

            page.goto(f"{live_server.url}/jobs/")
            job = RemediationJob.objects.get()
            job_row = page.locator("tbody tr", has_text=f"#{job.id}")
            assert job_row.locator("td.group-id").inner_text() == group_id
            assert job_row.locator("td", has_text="backfill").count() == 1
            page.screenshot(path=str(ARTIFACTS / "4-jobs.png"), full_page=True)
        finally:
            browser.close()
    assert dialogs == []  # no script from a group id ever ran
    assert (job.kind, job.approved_by, job.plan[0]["end"]) == ("backfill", operator, finding.backfill_end)
    assert Path(ARTIFACTS / "4-jobs.png").stat().st_size > 0
