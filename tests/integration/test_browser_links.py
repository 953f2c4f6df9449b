"""Links and targets (issue 44, item 5), in a real headless Chromium: jobs,
findings, expansions and groups lead to each other wherever one names
another; detail pages say where they sit (breadcrumbs); Health is a page of
the app; a finding's link is a target of at least 24×24 px. The rows of
test_browser_fit.py (long and hostile names)."""

from __future__ import annotations

import json

import pytest

from groups.web.links import group_url, topic_url
from tests.factories import make_finding
from tests.harness.browser import axe_violations
from tests.integration.test_browser_fit import long_names  # noqa: F401 - the fixture

pytestmark = pytest.mark.browser

# Every link to a finding's page, with its box: a single digit is 10×17 px unless the link is made bigger.
FINDING_TARGETS = """() => [...document.querySelectorAll('main a')].filter(a => /^\\/findings\\/\\d+\\/$/.test(a.pathname))
    .map(a => { const box = a.getBoundingClientRect(); return [a.textContent, Math.round(box.width), Math.round(box.height)]; })"""


def crumbs(page) -> list[str]:
    return page.locator("nav.breadcrumbs li").all_inner_texts()


@pytest.mark.django_db(transaction=True)
def test_jobs_findings_expansions_and_groups_link_each_other(long_names, live_server, page):  # noqa: F811
    rows = long_names
    job, expansion = rows["job"], rows["expansion"]
    repaired = rows["groups"][1]
    added = make_finding(repaired, rows["generation"], 4)  # a partition the expansion added

    page.goto(f"{live_server.url}/jobs/")
    page.locator("td.group-id a", has_text=repaired.group_id).first.click()
    page.wait_for_url(lambda url: url.endswith(group_url(repaired)))
    assert crumbs(page) == ["Groups", "prod-eu-west-1", repaired.group_id]

    page.goto(f"{live_server.url}/expansions/{expansion.id}/")
    assert crumbs(page) == ["Expansions", "prod-eu-west-1", rows["topic"].name, f"expansion {expansion.id}"]
    page.locator("table.expansion-groups a", has_text=f"backfill job {job.id}").click()
    page.wait_for_url(f"**/jobs/{job.id}/")
    assert crumbs(page) == ["Jobs", "prod-eu-west-1", repaired.group_id, f"backfill job #{job.id}"]
    page.locator("dd.job-expansions a").click()  # the job names the expansion that queued it
    page.wait_for_url(f"**/expansions/{expansion.id}/")
    page.locator("table.expansion-groups td.group-id a", has_text=repaired.group_id).click()
    page.wait_for_url(lambda url: url.endswith(group_url(repaired)))

    page.goto(f"{live_server.url}/findings/{added.id}/")
    assert crumbs(page) == ["Findings", "prod-eu-west-1", rows["topic"].name, f"finding {added.id}: partition 4"]
    page.locator("span.finding-expansions a").click()  # added by the expansion
    page.wait_for_url(f"**/expansions/{expansion.id}/")
    page.goto(f"{live_server.url}/findings/{added.id}/")
    page.locator("nav.breadcrumbs a", has_text=rows["topic"].name).click()
    page.wait_for_url(lambda url: url.endswith(f"{topic_url(rows['topic'])}?generation={rows['generation'].number}"))
    assert crumbs(page) == ["Topics", "prod-eu-west-1", rows["topic"].name]
    page.locator("nav.breadcrumbs a", has_text="prod-eu-west-1").click()
    page.wait_for_url("**/topics/?cluster=prod-eu-west-1")
    # A finding on a partition no expansion added names none.
    page.goto(f"{live_server.url}/findings/{rows['finding'].id}/")
    assert page.locator("span.finding-expansions").count() == 0
    assert axe_violations(page) == []


@pytest.mark.django_db(transaction=True)
def test_health_is_a_page_of_the_app_and_healthz_stays_json(long_names, live_server, page):  # noqa: F811
    page.goto(f"{live_server.url}/")
    page.get_by_role("navigation", name="main").get_by_role("link", name="Health").click()
    page.wait_for_url(f"{live_server.url}/health/")
    assert page.locator("h1").inner_text() == "Health"
    assert page.locator("nav a[aria-current=page]").inner_text() == "Health"
    assert page.locator("dl.health-checks dd").all_inner_texts() == ["answers", "answers"]
    cluster = page.locator("table.health-clusters tbody tr")
    assert cluster.count() == 1 and cluster.locator("td").first.inner_text() == "prod-eu-west-1"
    assert axe_violations(page) == []
    response = page.goto(f"{live_server.url}/healthz")
    assert response.headers["content-type"] == "application/json"
    assert set(json.loads(page.locator("body").inner_text())["checks"]) == {"database", "redis", "kafka"}


@pytest.mark.django_db(transaction=True)
def test_a_findings_link_is_a_target_of_at_least_24_px(long_names, live_server, page):  # noqa: F811
    for path in ("/?view=partitions", "/?view=history", "/"):
        page.goto(f"{live_server.url}{path}")
        targets = page.evaluate(FINDING_TARGETS)
        assert len(targets) >= 5, (path, targets)
        assert [t for t in targets if t[1] < 24 or t[2] < 24] == [], path
