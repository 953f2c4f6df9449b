"""Dark pages (issue 44): in a real headless Chromium that prefers dark, at
1,440×900 and 390×844, axe-core finds no serious or critical violation (color
contrast among them) on the home page, a finding, a topic, the jobs and the
other pages a person reads, under the real Content-Security-Policy; and a
person's own choice (light or dark, on their account page) overrides what the
browser prefers. Rows come from the ORM factories: one of each finding state
and job status, so every pill is drawn."""

from __future__ import annotations

import pytest

from groups.models import AuditEvent, Finding, PersonSettings, RemediationJob
from groups.web.links import group_url, topic_url
from tests.factories import (
    HOSTILE_GROUP_ID,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_group_topic,
    make_topic,
)
from tests.harness.browser import OPERATOR_PASSWORD, VIEWPORTS, approver_operator, axe_violations, log_in

pytestmark = pytest.mark.browser

# The body's background in each palette (gapwatch.css's and gapwatch-dark.css's --page).
LIGHT_PAGE, DARK_PAGE = "rgb(246, 247, 249)", "rgb(13, 17, 23)"
BACKGROUND = "getComputedStyle(document.body).backgroundColor"


@pytest.fixture
def dark_console(transactional_db):
    """A cluster with a topic in two generations, two groups (one hostile) with a finding in every state,
    a job in every status, an audit row; the operator, an approver, to log in as."""
    operator = approver_operator()
    cluster = make_cluster("prod")
    topic = make_topic(cluster, "orders", partition_count=6)
    make_generation(topic, 1, (0, 1, 2))
    generation = make_generation(topic, 2, (0, 1, 2, 3, 4, 5))
    groups = [make_group(cluster, "billing", member_count=2), make_group(cluster, HOSTILE_GROUP_ID, member_count=0)]
    for group in groups:
        make_group_topic(group, topic, 40)
    findings = [make_finding(groups[partition % 2], generation, partition, state=state)
                for partition, state in enumerate(Finding.State.values)]
    for status in RemediationJob.Status.values:
        RemediationJob.objects.create(cluster=cluster, group=groups[0], kind=RemediationJob.Kind.RESET,
                                      status=status, requested_by=operator)
    AuditEvent.objects.create(actor=operator, action="group.changed", cluster=cluster, object_type="group",
                              object_id=str(groups[1].pk), detail={"group": HOSTILE_GROUP_ID})
    gap = next(f for f in findings if f.state == Finding.State.GAP)
    job = RemediationJob.objects.order_by("id").first()
    pages = ["/", "/?view=partitions", "/?view=history", f"/findings/{gap.id}/", topic_url(topic),
             f"{topic_url(topic)}?generation=1", "/jobs/", f"/jobs/{job.id}/", group_url(groups[1]), "/groups/",
             "/topics/", "/clusters/", "/clusters/prod/", "/audit/", "/account/tokens/"]
    return operator, pages


def _violations(page, live_server, paths: list[str]) -> tuple[list[str], list[str]]:
    """(axe's serious and critical violations, Content-Security-Policy reports) over ``paths``."""
    csp: list[str] = []
    page.on("console", lambda message: csp.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    found: list[str] = []
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        found += axe_violations(page)
    return found, csp


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_dark_pages_have_no_contrast_or_other_serious_violation(dark_console, live_server, chromium, viewport):
    operator, paths = dark_console
    context = chromium.new_context(viewport=VIEWPORTS[viewport], color_scheme="dark")
    try:
        page = context.new_page()
        log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
        assert page.evaluate(BACKGROUND) == DARK_PAGE  # the system's choice, followed
        found, csp = _violations(page, live_server, paths)
        # A message on its tinted background, after saving a setting.
        page.goto(f"{live_server.url}/account/tokens/")
        page.select_option("#color-scheme-choice", "system")
        page.click("form.color-scheme button[type=submit]")
        page.wait_for_selector("ul.messages li.msg-success")
        found += axe_violations(page)
        assert found == [], "\n".join(found)
        assert csp == []
    finally:
        context.close()


def test_a_persons_choice_overrides_the_browsers(dark_console, live_server, chromium):
    operator, _ = dark_console
    for prefers, chosen, expected in (("light", "dark", DARK_PAGE), ("dark", "light", LIGHT_PAGE),
                                      ("dark", "system", DARK_PAGE), ("light", "system", LIGHT_PAGE)):
        context = chromium.new_context(color_scheme=prefers)
        try:
            page = context.new_page()
            log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
            page.goto(f"{live_server.url}/account/tokens/")
            page.select_option("#color-scheme-choice", chosen)
            page.click("form.color-scheme button[type=submit]")
            page.wait_for_selector("ul.messages li.msg-success")
            assert PersonSettings.objects.get(user=operator).color_scheme == chosen
            page.goto(f"{live_server.url}/")
            assert page.evaluate(BACKGROUND) == expected, (prefers, chosen)
            # Form controls and scroll bars follow too: the browser is told the schemes the page supports.
            scheme = page.evaluate("document.querySelector('meta[name=color-scheme]').content")
            assert scheme == {"dark": "dark", "light": "light", "system": "light dark"}[chosen], (prefers, chosen)
            if chosen == "dark" or chosen == "light":
                assert axe_violations(page) == [], (prefers, chosen)
        finally:
            context.close()
