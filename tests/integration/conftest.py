"""Fixtures of the integration tests: the local cluster, a viewer, groups to
delete, a Spark Connect session, the share-group broker, clients and reader,
and one headless Chromium (the broker and an approver are in tests/conftest.py,
shared with tests/faults)."""

from __future__ import annotations

import pytest


@pytest.fixture
def cluster(kafka_bootstrap):
    """The local broker registered as cluster `local` (needs the database)."""
    from groups.models import Cluster

    return Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)


@pytest.fixture
def group_ids(broker):
    """Groups a test registers here are deleted from the shared broker after it."""
    ids: list[str] = []
    yield ids
    if ids:
        for future in broker.admin.delete_consumer_groups(ids, request_timeout=30).values():
            try:
                future.result(timeout=60)
            except Exception:  # noqa: BLE001 - best effort: a group may never have existed, or a member be leaving
                pass


@pytest.fixture
def spark(connect_server):
    """A session of the session's Spark Connect server, stopped after the test."""
    from adapters.spark.connect import connect_session

    session = connect_session(connect_server.url, token=connect_server.token)
    yield session
    session.stop()


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


# The share-group modules run on the session's 4.3.1 broker (``kafka_4_3``), the
# last release whose share groups start a partition added to a topic they read at
# its end (4.4.0 starts it at offset 0, KAFKA-20742).
@pytest.fixture(scope="session")
def share_bootstrap(kafka_4_3) -> str:
    return kafka_4_3.bootstrap


@pytest.fixture
def share_broker(share_bootstrap):
    """``broker`` on the share-group broker: topics a test creates through it are deleted after it."""
    from tests.harness.kafka_clients import Broker

    broker = Broker(share_bootstrap)
    yield broker
    broker.close()


@pytest.fixture
def share_cluster(share_bootstrap):
    """The share-group broker registered as cluster `local` (needs the database)."""
    from groups.models import Cluster

    return Cluster.objects.create(name="local", bootstrap_servers=share_bootstrap)


@pytest.fixture(scope="module")
def share_reader(share_bootstrap):
    """A reader of the share-group broker's share groups through Kafka's Java
    Admin; the process's JVM stays for the session."""
    from groups.domain.cluster_config import ClusterConfig
    from adapters.kafka.java_admin import JavaAdmin

    reader = JavaAdmin(ClusterConfig(share_bootstrap), timeout=10)
    yield reader
    reader.close()
