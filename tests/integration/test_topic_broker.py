"""Issue 44, item 6: the topic page shows the topic as the broker holds it
now (partitions with leader, replicas, in-sync replicas, start and end
offsets, sizes from DescribeLogDirs; configs, those set first), read on
demand by a real worker from the real broker; a broker that does not answer
is a sentence on the page, never an error page."""

from __future__ import annotations

import pytest

from groups.models import Cluster
from groups.web.links import topic_url
from tests.factories import make_topic
from tests.harness.browser import OPERATOR_PASSWORD, approver_operator, axe_violations, log_in
from tests.harness.pages import client_for

FETCHED = {"HTTP_X_REQUESTED_WITH": "fetch"}
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def on_broker(broker, unique, cluster):
    """A topic of three partitions kept an hour, five records on partition 0, stored as the poll would."""
    name = f"broker-page-{unique}"
    broker.create_topic(name, 3, config={"retention.ms": "3600000"})
    broker.produce(name, 0, 5)
    return make_topic(cluster, name, partition_count=3)


def test_it_shows_partitions_and_configs_read_from_the_broker(on_broker, viewer, celery_worker_thread):
    client = client_for(viewer)
    page = client.get(f"{topic_url(on_broker)}broker")
    assert page.status_code == 200
    text = page.content.decode()
    assert text.count('<tr data-partition="') == 3
    first = text[text.index('<tr data-partition="0"'):text.index('<tr data-partition="1"')]
    assert "broker 1" in first and ">0</td>" in first and ">5</td>" in first  # leader, start 0, end 5
    assert "not given" not in first and "bytes" in first  # the broker reported its size
    configs = text[text.index('class="topic-configs"'):]
    assert configs.index("retention.ms") < configs.index("cleanup.policy"), "what is set comes before defaults"
    assert "set on the topic" in configs and "3600000" in configs
    fragment = client.get(f"{topic_url(on_broker)}broker", **FETCHED).content.decode()
    assert "<html" not in fragment and 'class="topic-partitions"' in fragment


def test_a_broker_that_does_not_answer_is_a_sentence(viewer, celery_worker_thread, settings):
    settings.KAFKA_TIMEOUT_SECONDS = 2
    away = Cluster.objects.create(name="away", bootstrap_servers="127.0.0.1:1")
    topic = make_topic(away, "orders")
    client = client_for(viewer)
    as_page = client.get(f"{topic_url(topic)}broker")
    assert as_page.status_code == 502
    assert "Could not read the topic from the broker: Kafka at 127.0.0.1:1" in as_page.content.decode()
    assert client.get(f"{topic_url(topic)}broker", **FETCHED).status_code == 200  # the page shows the sentence
    assert client.get("/topics/999999/broker").status_code == 404
    assert client.get("/clusters/away/topics/nothing/broker").status_code == 404


@pytest.mark.browser
def test_the_topic_page_loads_the_broker_part_by_itself(on_broker, page, live_server, celery_worker_thread):
    approver_operator()
    log_in(page, live_server, "operator", OPERATOR_PASSWORD)
    page.goto(f"{live_server.url}{topic_url(on_broker)}")
    page.wait_for_selector("#topic-broker table.topic-partitions")  # fetched after the page rendered
    assert page.locator("#topic-broker tr[data-partition]").count() == 3
    assert axe_violations(page) == []
