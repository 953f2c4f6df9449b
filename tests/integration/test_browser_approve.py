"""Approve exactly what is on screen (issue 26), in a real headless Chromium
on a real Kafka gap: the operator changes the reset target to an offset and
presses Approve without Preview. The page refuses to act on values it did not
preview and shows their preview; approved from there, the job stores those
values, and the offsets read back from the broker are the ones shown.
Screenshots go to .gapwatch/test-artifacts/approve-*.png.
"""

from __future__ import annotations

import pytest

from groups.models import Cluster, Finding, RemediationJob
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import wait_until
from tests.harness.browser import ARTIFACTS, OPERATOR_PASSWORD, approver_operator, log_in
from tests.harness.scenarios import committed, gap_scenario

TYPED = 40  # the offset the operator types: inside the log, above the group's commit, far from earliest (0)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_resets_to_the_offset_on_screen_not_to_the_last_preview(
    page, live_server, broker, unique, celery_worker_thread
):
    operator = approver_operator()
    cluster = Cluster.objects.create(name="local", bootstrap_servers=broker.bootstrap)
    topic, group_id = f"approve-{unique}", f"approve-group-{unique}"
    gap_scenario(broker, cluster, topic, group_id)
    broker.produce(topic, 2, TYPED)  # so that offset 40 is inside the log, not clamped
    # After the consumers stopped (they commit as they close): the plan starts from their last commit.
    assert poll_cluster(cluster_id=cluster.id).ok
    finding = Finding.objects.get(topic__name=topic, partition=2, closed_at__isnull=True)
    assert finding.log_start_offset == 0 and finding.committed_offset < TYPED < finding.high_watermark

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1500, "height": 900})
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)

    page.goto(f"{live_server.url}/findings/reset?ids={finding.id}")
    assert page.locator("table tbody tr td strong").first.inner_text() == "0"  # earliest, previewed
    page.select_option("select[name=target]", "offset")
    page.fill("input[name=value]", str(TYPED))
    page.click("text=Approve reset")  # without Preview
    page.wait_for_load_state("load")
    assert RemediationJob.objects.count() == 0, "nothing is created from values never previewed"
    assert page.locator("p.error").inner_text() == (
        "The values changed since the preview; check the plan below and approve again.")
    assert page.locator("select[name=target]").input_value() == "offset"
    assert page.locator("input[name=value]").input_value() == str(TYPED)
    assert page.locator("table tbody tr td strong").first.inner_text() == str(TYPED)
    page.screenshot(path=str(ARTIFACTS / "approve-1-re-preview.png"), full_page=True)

    page.click("text=Approve reset")
    page.wait_for_url("**/jobs/*/")
    job = RemediationJob.objects.get()
    assert job.params == {"target": "offset", "value": TYPED}
    assert [(p["partition"], p["current"], p["planned"], p["clamped"]) for p in job.plan] == [
        (2, finding.committed_offset, TYPED, False)]
    wait_until(lambda: RemediationJob.objects.get(id=job.id).status in RemediationJob.FINISHED,
               timeout=120, interval=0.5, what="the reset job to finish")
    job.refresh_from_db()
    assert job.status == "succeeded", (job.status_reason, job.error)
    page.reload()
    plan = page.locator("h2:text('Plan') + table tbody tr").first
    assert plan.locator("td").nth(3).inner_text() == str(TYPED)
    page.screenshot(path=str(ARTIFACTS / "approve-2-job.png"), full_page=True)
    assert [(row["planned"], row["after"]) for row in job.result["partitions"]] == [(TYPED, TYPED)]
    assert committed(broker, group_id, topic)[2] == TYPED  # read straight from the broker
