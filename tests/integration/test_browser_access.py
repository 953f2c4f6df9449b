"""Every page of the console, in a real headless Chromium, checked by
axe-core (issue 22, item 9): no serious or critical accessibility violation,
no Content-Security-Policy violation, and at a phone's width (390 px) no page
wider than the screen (wide tables scroll inside themselves); and a job page
that follows its job without a reload (issue 22, item 4). Rows come from the
ORM factories, with a hostile group id."""

from __future__ import annotations

import pytest

from groups.models import Finding, RemediationJob
from tests.factories import HOSTILE_GROUP_ID, make_cluster, make_finding, make_generation, make_group, make_topic
from tests.integration.browser_harness import ARTIFACTS, OPERATOR_PASSWORD, approver_operator, axe_violations, log_in


@pytest.fixture
def every_page(db, live_server):
    """The path of every page an approver reaches, over stored state that
    fills each of them: open and closed findings, a job, a group, a topic."""
    operator = approver_operator()
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "orders")
    generation = make_generation(topic, 2, (0, 1, 2, 3))
    group = make_group(cluster, HOSTILE_GROUP_ID, state="Empty", member_count=0)
    gap = make_finding(group, generation, 2, committed_offset=1034, high_watermark=1100, missed_definite=70,
                       missed_possible=3)
    make_finding(group, generation, 3, state=Finding.State.EXPIRED, expired=4)
    make_finding(make_group(cluster, "billing"), generation, 2, state=Finding.State.COVERED, missed_definite=0,
                 missed_possible=0)
    job = RemediationJob.objects.create(cluster=cluster, group=group, kind=RemediationJob.Kind.BACKFILL,
                                        status=RemediationJob.Status.FAILED, requested_by=operator,
                                        error="broker gone", params={"sink": "parquet"})
    job.findings.add(gap, through_defaults={"kind": job.kind, "active": False})
    return operator, [
        "/", "/?view=partitions", "/?view=history", "/?view=partitions&group=nobody", f"/findings/{gap.pk}/",
        f"/findings/reset?ids={gap.pk}", f"/findings/backfill?ids={gap.pk}", f"/findings/{gap.pk}/dismiss",
        f"/findings/{gap.pk}/records",
        f"/findings/dismiss?ids={gap.pk}", "/jobs/", f"/jobs/{job.pk}/", "/groups/", "/topics/",
        f"/groups/{group.pk}/", f"/topics/{topic.pk}/", "/clusters/", "/clusters/add", "/audit/",
    ]


def _visit_all(page, live_server, paths: list[str]) -> tuple[list[str], list[str]]:
    """(axe violations, CSP violations) over every path."""
    csp: list[str] = []
    page.on("console", lambda message: csp.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    found: list[str] = []
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        found += axe_violations(page)
    return found, csp


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_page_has_a_serious_or_critical_accessibility_violation(every_page, live_server, page):
    operator, paths = every_page
    page.goto(f"{live_server.url}/accounts/login/")
    found, csp = _visit_all(page, live_server, ["/accounts/login/"])
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    more, more_csp = _visit_all(page, live_server, paths)
    assert found + more == []
    assert csp + more_csp == []

    # The skip link is the first thing the keyboard reaches, and it lands on the page's content.
    page.goto(f"{live_server.url}/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_page_fits_a_phone_screen(every_page, live_server, chromium):
    operator, paths = every_page
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
        too_wide = {}
        for path in paths:
            page.goto(f"{live_server.url}{path}")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 390:
                too_wide[path] = width
        assert too_wide == {}
        # The per-partition list on the phone: its table scrolls inside itself, and the
        # row actions are not pinned over the cells.
        page.goto(f"{live_server.url}/?view=partitions")
        position = page.evaluate("getComputedStyle(document.querySelector('td.row-actions')).position")
        assert position == "static"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "phone-partitions.png"), full_page=True)
    finally:
        context.close()



@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_job_page_follows_its_job_without_a_reload(every_page, live_server, page):
    """live.js under the real CSP: the page of an approved job shows it
    succeed with no reload (the header's refresh is the same script on a
    15 s period; its fragment is tested in test_pages_console.py)."""
    from django.utils import timezone

    operator, _ = every_page
    job = RemediationJob.objects.filter(status=RemediationJob.Status.FAILED).get()
    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.APPROVED)
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    page.goto(f"{live_server.url}/jobs/{job.id}/")
    assert page.locator("h1 .pill").inner_text() == "approved"

    RemediationJob.objects.filter(id=job.id).update(status=RemediationJob.Status.SUCCEEDED,
                                                    finished_at=timezone.now())
    page.wait_for_selector("h1 .pill.job-succeeded", timeout=10_000)
