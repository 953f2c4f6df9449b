"""Bulk approval in a real headless Chromium on the demo's state (issue 22,
item 7): the operator selects two groups' losses on two topics and a covered
partition of the demo, asks for resets, sees each finding's own plan and the
covered one refused, approves, and a real worker resets each group on the
real broker, where the offsets read back are the ones previewed. Opened
again, the preview offers nothing more to approve. Screenshots go to
.gapwatch/test-artifacts/bulk-approve-*.png."""

from __future__ import annotations

import pytest

from groups.models import Finding, RemediationJob
from tests.harness.browser import ARTIFACTS, OPERATOR_PASSWORD, approver_operator, axe_violations, log_in
from tests.harness.kafka_clients import wait_until
from tests.harness.scenarios import committed


@pytest.mark.browser
def test_it_approves_a_reset_per_selected_finding_across_groups_and_refuses_the_covered_one(
    demo_state, live_server, page, celery_worker_thread
):
    operator = approver_operator()
    losses = list(Finding.objects.filter(group__group_id__in=demo_state.loss_topics).order_by("id"))
    covered = Finding.objects.filter(topic__name=demo_state.topic, state=Finding.State.COVERED).first()
    assert len(losses) == 2 and {f.state for f in losses} == {"gap"} and covered is not None
    chosen = [*losses, covered]

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    page.goto(f"{live_server.url}/?view=partitions")
    for finding in chosen:
        page.check(f"input[name=ids][value='{finding.id}']")
    page.click("button:text('Approve resets…')")
    page.wait_for_url("**/findings/approve?**")
    rows = page.locator("table.approve-selection tbody tr")
    assert rows.count() == len(chosen)
    for finding in losses:
        row = page.locator(f"tr[data-finding='{finding.id}']")
        assert row.get_attribute("class") == "accepted"
        assert f"to offset {finding.log_start_offset}, re-delivers {finding.committed_offset - finding.log_start_offset}" \
            in row.locator("td.plan").inner_text()
    assert "not approvable: covered" in page.locator(f"tr[data-finding='{covered.id}'] td.plan").inner_text()
    assert axe_violations(page) == []
    page.screenshot(path=str(ARTIFACTS / "bulk-approve-1-preview.png"), full_page=True)

    page.click("button:text('Approve 2 reset jobs')")
    page.wait_for_url("**/?view=partitions")
    jobs = list(RemediationJob.objects.order_by("id"))
    assert [list(job.findings.values_list("id", flat=True)) for job in jobs] == [[f.id] for f in losses]
    shown = page.locator("ul.messages li").all_inner_texts()
    assert shown == [f"Approved 2 reset jobs for 2 of 3 findings: job {jobs[0].id} for finding {losses[0].id}, "
                     f"job {jobs[1].id} for finding {losses[1].id}.",
                     f"Not approved: finding {covered.id}: covered: the group read the new partition from its "
                     "start; nothing to repair"]
    page.screenshot(path=str(ARTIFACTS / "bulk-approve-2-approved.png"), full_page=True)

    wait_until(lambda: all(job.status in RemediationJob.FINISHED for job in RemediationJob.objects.all()),
               timeout=120, interval=0.5, what="the reset jobs to finish")
    for job, finding in zip(RemediationJob.objects.order_by("id"), losses, strict=True):
        assert job.status == "succeeded", (job.status_reason, job.error)
        group_id = finding.group.group_id
        assert committed(demo_state.broker, group_id, demo_state.loss_topics[group_id])[2] == \
            finding.log_start_offset  # read straight from the broker

    # Opened again (a second tab, a replay): nothing left to approve, nothing created twice.
    page.goto(f"{live_server.url}/findings/approve?kind=reset&" + "&".join(f"ids={f.id}" for f in chosen))
    assert page.locator("tr.accepted").count() == 0
    assert page.locator("#approve-many-form button[type=submit]").is_disabled()
    assert RemediationJob.objects.count() == 2
