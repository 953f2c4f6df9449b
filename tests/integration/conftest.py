"""Fixtures of the integration tests: the local cluster, a viewer, share-group
clients and reader, and one headless Chromium (the broker and an approver are in tests/conftest.py, shared
with tests/faults)."""

from __future__ import annotations

import pytest


@pytest.fixture
def cluster(kafka_bootstrap):
    """The local broker registered as cluster `local` (needs the database)."""
    from groups.models import Cluster

    return Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)


@pytest.fixture
def viewer(db):
    """A user in the viewer role (reads only)."""
    from tests.factories import user_with_role

    return user_with_role("viewer", "viewer")


@pytest.fixture
def viewer_client(viewer):
    """A test client of its own, logged in as ``viewer``."""
    from tests.harness.pages import client_for

    return client_for(viewer)


@pytest.fixture
def approver_client(approver):
    """A test client of its own, logged in as ``approver``."""
    from tests.harness.pages import client_for

    return client_for(approver)


@pytest.fixture
def api(client, viewer):
    """pytest-django's ``client``, logged in as ``viewer`` (a user in no role reads nothing)."""
    client.force_login(viewer)
    return client


@pytest.fixture(scope="session")
def keycloak():
    """One Keycloak per session (tests/harness/keycloak.py; about 20 s to
    start on two cores), its test realm imported: the OAuth issuer of the
    secured broker and the OpenID provider people log in through."""
    from tests.harness.keycloak import Keycloak

    server = Keycloak().start()
    try:
        server.wait()
        server.import_realm()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the whole session (starting one takes seconds)."""
    from playwright.sync_api import sync_playwright

    from tests.harness.browser import launch

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


@pytest.fixture
def stored_state(db):
    """The stored state of the /metrics tests (tests.factories.make_metrics_state)."""
    from tests.factories import make_metrics_state

    make_metrics_state()


@pytest.fixture(scope="session")
def demo_stack(django_db_setup, django_db_blocker, kafka_bootstrap, tmp_path_factory):
    """The demo's state on the test broker, built once per session
    (tests.harness.demo); its rows are dumped, then flushed."""
    from django.core.management import call_command

    from tests.harness.demo import DemoStack

    stack = DemoStack(kafka_bootstrap, tmp_path_factory.mktemp("demo") / "demo.json")
    with django_db_blocker.unblock():
        try:
            stack.build()
        except BaseException:
            stack.close()
            raise
        finally:
            call_command("flush", interactive=False, verbosity=0)
    yield stack
    stack.close()


@pytest.fixture
def demo_state(transactional_db, demo_stack):
    """The demo's stored state in this test's database."""
    demo_stack.load()
    return demo_stack


@pytest.fixture
def share_consumers():
    """Share-group clients a test starts (Kafka's console share consumer,
    librdkafka's): closed after it, so their groups can be Empty for the next."""
    started: list = []
    yield started
    for consumer in started:
        consumer.close()


@pytest.fixture(scope="module")
def share_reader(kafka_bootstrap):
    """A reader of the module's broker's share groups through Kafka's Java
    Admin (``kafka_bootstrap``: the share-group modules run on the session's
    4.3.1 broker); the process's JVM stays for the session."""
    from groups.domain.cluster_config import ClusterConfig
    from tasks.kafka.java_admin import JavaAdmin

    reader = JavaAdmin(ClusterConfig(kafka_bootstrap), timeout=10)
    yield reader
    reader.close()
