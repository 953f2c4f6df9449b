"""A person logs in with a real headless Chromium and sees the dashboard."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from groups.models import Cluster
from groups.roles import ensure_roles

@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_logs_in_and_shows_the_registered_clusters(live_server, page):
    operator = get_user_model().objects.create_user("operator", password="correct horse battery")
    ensure_roles()
    operator.groups.add(Group.objects.get(name="viewer"))
    Cluster.objects.create(name="local", bootstrap_servers="127.0.0.1:9092")
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    # The refused login answers on the same URL: wait for the answer, not for a navigation.
    expect(page.locator("text=Please enter a correct username")).to_be_visible()
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("h1").inner_text() == "New partitions"
    page.click("nav >> text=Clusters")
    expect(page.locator("td", has_text="local").first).to_be_visible()
