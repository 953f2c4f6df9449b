"""Every page of the console, in a real headless Chromium, checked by
axe-core (issue 22, item 9) at a desktop's 1440x900 and a phone's 390x844:
no serious or critical accessibility violation, no Content-Security-Policy
violation, and on the phone no page wider than the screen (wide tables
scroll inside themselves); and a job page that follows its job without a
reload (issue 22, item 4). The state is the demo's, made by its own clients
on the test broker and the real poller (tests.harness.demo),
with two groups with a loss the test created; the record viewer reads real
records through a real worker."""

from __future__ import annotations

import pytest
from django.test import override_settings

from groups.models import ConsumerGroup, Finding, RemediationJob, Topic
from groups.services import remediation
from groups.web.links import group_url, topic_url
from tests.harness.browser import ARTIFACTS, OPERATOR_PASSWORD, VIEWPORTS, approver_operator, axe_violations, log_in



@pytest.fixture
def every_page(demo_state):
    """The path of every page an approver reaches, over the demo's state: its
    `latest` group's gap, its `earliest` group's covered partitions, the
    groups with a loss, a job waiting for a second approver, a group and a topic."""
    operator = approver_operator()
    latest = Finding.objects.filter(group__group_id=demo_state.groups["demo-latest"]).order_by("partition")
    gap, covered = latest.first(), Finding.objects.filter(state=Finding.State.COVERED).first()
    losses = list(Finding.objects.filter(group__group_id__in=demo_state.loss_topics).values_list("id", flat=True))
    assert gap is not None and covered is not None and len(losses) == 2, list(Finding.objects.values_list(
        "group__group_id", "partition", "state", "missed_definite", "missed_possible", "committed_offset",
        "explanation"))
    with override_settings(FOUR_EYES=True):
        job = remediation.job_request(user=operator, finding_ids=[losses[0]], kind="reset",
                                      params={"target": "earliest"})
    group = ConsumerGroup.objects.get(group_id=demo_state.groups["demo-latest"])
    topic = Topic.objects.get(name=demo_state.topic)
    selection = "&".join(f"ids={i}" for i in [gap.pk, losses[1], covered.pk])
    return operator, [
        "/", "/?view=partitions", "/?view=history", "/?view=partitions&group=nobody", f"/findings/{gap.pk}/",
        f"/findings/{covered.pk}/",
        f"/findings/reset?ids={gap.pk}", f"/findings/backfill?ids={gap.pk}", f"/findings/{gap.pk}/dismiss",
        f"/findings/{gap.pk}/records", f"/findings/dismiss?{selection}",
        f"/findings/approve?kind=reset&{selection}", f"/findings/approve?kind=backfill&{selection}",
        "/jobs/", f"/jobs/{job.pk}/", "/groups/", "/topics/", group_url(group), topic_url(topic),
        "/clusters/", f"/clusters/{topic.cluster.name}/", "/clusters/add", "/audit/", "/account/tokens/",
    ]


def _visit_all(page, live_server, paths: list[str], *, width: int) -> tuple[list[str], list[str], dict]:
    """(axe violations, CSP violations, pages wider than ``width``) over every path."""
    csp: list[str] = []
    page.on("console", lambda message: csp.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    found: list[str] = []
    too_wide = {}
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        found += axe_violations(page)
        scrolled = page.evaluate("document.documentElement.scrollWidth")
        if scrolled > width:
            too_wide[path] = scrolled
    return found, csp, too_wide


@pytest.mark.browser
@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_no_page_has_a_serious_or_critical_accessibility_violation(
    every_page, live_server, chromium, celery_worker_thread, viewport
):
    operator, paths = every_page
    size = VIEWPORTS[viewport]
    context = chromium.new_context(viewport=size)
    try:
        page = context.new_page()
        page.goto(f"{live_server.url}/accounts/login/")
        found, csp, _ = _visit_all(page, live_server, ["/accounts/login/"], width=size["width"])
        log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
        more, more_csp, too_wide = _visit_all(page, live_server, paths, width=size["width"])

        # The record viewer with the records a worker read from the broker.
        records = next(path for path in paths if path.endswith("/records"))
        page.goto(f"{live_server.url}{records}")
        page.click("button:text('Read records')")
        page.wait_for_selector("table.records, p.error", timeout=60_000)
        assert page.locator("p.error").count() == 0, page.locator("p.error").all_inner_texts()
        more += axe_violations(page)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{viewport}-demo-records.png"), full_page=True)

        assert found + more == [], "\n".join(found + more)
        assert csp + more_csp == []
        if viewport == "phone":
            assert too_wide == {}
            # The per-partition list on the phone: its table scrolls inside itself, and the
            # row actions are not pinned over the cells.
            page.goto(f"{live_server.url}/?view=partitions")
            position = page.evaluate("getComputedStyle(document.querySelector('td.row-actions')).position")
            assert position == "static"
            page.screenshot(path=str(ARTIFACTS / "phone-partitions.png"), full_page=True)
        else:
            # The skip link is the first thing the keyboard reaches, and it lands on the page's content.
            page.goto(f"{live_server.url}/")
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.textContent") == "Skip to content"
            page.keyboard.press("Enter")
            assert page.evaluate("document.activeElement.id") == "main"
    finally:
        context.close()


@pytest.mark.browser
def test_a_job_page_follows_its_job_without_a_reload(every_page, live_server, page):
    """live.js under the real CSP: the page of an approved job shows it
    succeed with no reload (the header's refresh is the same script on a
    15 s period; its fragment is tested in test_pages_console.py)."""
    from django.utils import timezone

    operator, _ = every_page
    job = RemediationJob.objects.get()
    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.APPROVED)
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    page.goto(f"{live_server.url}/jobs/{job.id}/")
    assert page.locator("h1 .pill").inner_text() == "approved"

    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.SUCCEEDED,
                                                    finished_at=timezone.now())
    page.wait_for_selector("h1 .pill.job-succeeded", timeout=10_000)
