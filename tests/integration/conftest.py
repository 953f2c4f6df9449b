"""Fixtures shared by the integration tests: the real broker, the local
cluster, and users in the two roles."""

from __future__ import annotations

import pytest

from tests.integration.kafka_harness import Broker


@pytest.fixture
def broker(kafka_bootstrap):
    """Topics a test creates through it are deleted after the test."""
    broker = Broker(kafka_bootstrap)
    yield broker
    broker.close()


@pytest.fixture
def cluster(kafka_bootstrap):
    """The local broker registered as cluster `local` (needs the database)."""
    from groups.models import Cluster

    return Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)


@pytest.fixture
def approver(db):
    """A user in the approver role (may approve remediations)."""
    from tests.factories import user_with_role

    return user_with_role("approver", "approver")


@pytest.fixture
def viewer(db):
    """A user in the viewer role (reads only)."""
    from tests.factories import user_with_role

    return user_with_role("viewer", "viewer")


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the whole session (starting one takes seconds)."""
    from playwright.sync_api import sync_playwright

    from tests.integration.browser_harness import launch

    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    """A fresh browser context (no cookies, no storage) and page for one test."""
    context = chromium.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()
