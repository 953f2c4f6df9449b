"""The Content-Security-Policy blocks nothing Gapwatch's own pages need: a
real Chromium visits every page an approver uses, the admin's cluster form
included, and reports no violation (an inline script or style would be one)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from groups.roles import ensure_roles
from groups.web.links import group_url, topic_url
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic

PAGES = ["/", "/jobs/", "/clusters/", "/clusters/add", "/audit/", "/admin/", "/admin/groups/cluster/",
         "/admin/groups/cluster/add/", "/accounts/login/"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_page_violates_the_content_security_policy(live_server, page):
    ensure_roles()
    get_user_model().objects.create_superuser("root", password="correct horse battery")
    cluster = make_cluster("prod")
    group = make_group(cluster, "billing", state="Empty", member_count=0)
    finding = make_finding(group, make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2)), 2,
                           committed_offset=1034, high_watermark=1100, missed_definite=70, missed_possible=3)
    violations: list[str] = []
    page.on("console", lambda message: violations.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "root")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.wait_for_selector("text=orders")
    approve_pages = [f"/findings/reset?ids={finding.pk}", f"/findings/backfill?ids={finding.pk}"]
    for path in [*PAGES, *approve_pages, group_url(group), topic_url(finding.topic), "/clusters/prod/",
                 f"/clusters/{cluster.pk}/edit",
                 "/?view=partitions", f"/findings/{finding.pk}/"]:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("load")
    assert violations == []
