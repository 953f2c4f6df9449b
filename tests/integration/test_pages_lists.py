"""The topics and groups lists for thousands of rows (issue 44): deleted topics
and gone groups hidden until asked for, saying how many; the orders a person
picks (name, lag, findings, state, last seen, ...); the pager keeping every
filter; what the page does not offer answered with a 400 that says why."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from tests.factories import NOW, make_cluster, make_finding, make_generation, make_group, make_group_topic, make_topic


def topic_names(body: str) -> list[str]:
    links = re.findall(r'<a href="/clusters/[^"/]+/topics/[^"/]+/">(.+?)</a>', body)
    return [name.replace("<wbr>", "") for name in links]


def listed_group_ids(body: str) -> list[str]:
    links = re.findall(r'<a href="/clusters/[^"/]+/groups/[^"/]+/">(.+?)</a>', body)
    return [name.replace("<wbr>", "") for name in links]


@pytest.fixture
def lists(db):
    prod = make_cluster("prod")
    orders = make_topic(prod, "orders", partition_count=12)
    make_topic(prod, "audit", partition_count=1)
    for n in range(2):
        make_topic(prod, f"old-{n}", deleted=True)
    generation = make_generation(orders, 2, (0, 1, 2, 3))
    busy = make_group(prod, "busy", state="Stable", last_seen_at=NOW)
    idle = make_group(prod, "idle", state="Empty", last_seen_at=NOW - timedelta(minutes=1))
    lossy = make_group(prod, "lossy", state="PreparingRebalance", last_seen_at=NOW - timedelta(minutes=2))
    make_group(prod, "ancient", present=False, state="Dead", last_seen_at=NOW - timedelta(days=30))
    make_group_topic(busy, orders, lag=900)
    make_group_topic(idle, orders, lag=5)
    make_group_topic(lossy, orders, lag=50)
    for partition in (2, 3):
        make_finding(lossy, generation, partition)
    make_finding(idle, generation, 2)


def test_the_topics_list_hides_deleted_topics_until_asked_and_says_how_many(viewer_client, lists):
    body = viewer_client.get("/topics/").content.decode()
    assert topic_names(body) == ["audit", "orders"]
    assert '2 deleted topics hidden (<a href="?all=1">show them</a>)' in body
    everything = viewer_client.get("/topics/", {"all": "1"}).content.decode()
    assert topic_names(everything) == ["audit", "old-0", "old-1", "orders"]
    assert everything.count("(found deleted ") == 2 and "hide them" in everything


def test_the_groups_list_hides_gone_groups_until_asked(viewer_client, lists):
    body = viewer_client.get("/groups/").content.decode()
    assert listed_group_ids(body) == ["busy", "idle", "lossy"]
    assert "1 gone group hidden" in body
    everything = viewer_client.get("/groups/", {"all": "1"}).content.decode()
    assert listed_group_ids(everything) == ["ancient", "busy", "idle", "lossy"] and "(gone, last seen " in everything


@pytest.mark.parametrize(("sort", "expected", "why"), [
    ("", ["busy", "idle", "lossy"], "by name unless asked"),
    ("lag", ["busy", "lossy", "idle"], "highest lag first: 900, 50, 5"),
    ("findings", ["lossy", "idle", "busy"], "most open findings first: 2, 1, 0"),
    ("state", ["idle", "lossy", "busy"], "Empty, PreparingRebalance, Stable"),
    ("last_seen", ["busy", "idle", "lossy"], "the latest seen first"),
])
def test_the_groups_list_sorts_as_asked(viewer_client, lists, sort, expected, why):
    body = viewer_client.get("/groups/", {"sort": sort}).content.decode()
    assert listed_group_ids(body) == expected, why


@pytest.mark.parametrize(("sort", "expected", "why"), [
    ("findings", ["orders", "audit"], "the topic with open findings first"),
    ("partitions", ["orders", "audit"], "12 partitions before 1"),
    ("groups", ["orders", "audit"], "three groups read orders, none audit"),
])
def test_the_topics_list_sorts_as_asked(viewer_client, lists, sort, expected, why):
    assert topic_names(viewer_client.get("/topics/", {"sort": sort}).content.decode()) == expected, why


def test_the_pager_keeps_the_filters_the_order_and_the_toggle(viewer_client, db):
    stage = make_cluster("stage")
    for n in range(55):
        make_group(stage, f"bulk-{n:02d}", member_count=n)
    make_group(stage, "bulk-gone", present=False)
    first = viewer_client.get("/groups/", {"cluster": "stage", "sort": "state", "all": "1", "q": "bulk"}).content
    pager = re.search(r'<nav class="pager".*?</nav>', first.decode(), re.S).group(0)
    assert "page 1 of 2 · 56 in all" in pager
    assert 'href="?cluster=stage&amp;sort=state&amp;all=1&amp;q=bulk&amp;page=2"' in pager
    second = viewer_client.get("/groups/", {"cluster": "stage", "sort": "state", "all": "1", "q": "bulk",
                                            "page": 2}).content.decode()
    assert 'name="all" value="1" checked' in second and '<option value="state" selected>' in second


@pytest.mark.parametrize(("path", "query", "named"), [
    ("/groups/", {"sort": "bogus"}, "sort"),
    ("/topics/", {"sort": "lag"}, "sort"),  # the groups' order, not the topics'
    ("/groups/", {"all": "yes please"}, "all"),
])
def test_an_order_or_toggle_the_page_does_not_offer_is_a_400_saying_so(viewer_client, lists, path, query, named):
    response = viewer_client.get(path, query)
    body = response.content.decode()
    assert response.status_code == 400
    assert re.search(rf'<p class="error" role="alert">{named}: Select a valid choice', body), body
    assert topic_names(body) == [] and listed_group_ids(body) == []


PAGE_WORDS = "a page is a whole number from 1"


@pytest.mark.parametrize(("path", "query", "says"), [
    ("/", {"state": "bogus"}, "state: Select a valid choice"),
    ("/", {"page": "-1"}, f"page: {PAGE_WORDS}"),
    ("/", {"view": "partitions", "state": "bogus"}, "state: Select a valid choice"),
    ("/", {"view": "partitions", "page": "-1"}, f"page: {PAGE_WORDS}"),
    ("/", {"view": "partitions", "sort": "bogus"}, "sort: Select a valid choice"),
    ("/", {"view": "history", "since": "2026-13-45"}, "since: Enter a valid date."),
    ("/", {"view": "history", "resolution": "bogus"}, "resolution: Select a valid choice"),
    ("/jobs/", {"status": "bogus"}, "status: Select a valid choice"),
    ("/jobs/", {"kind": "rewind"}, "kind: Select a valid choice"),
    ("/jobs/", {"page": "two"}, f"page: {PAGE_WORDS}"),
    ("/audit/", {"page": "0"}, f"page: {PAGE_WORDS}"),
    ("/audit/", {"date_from": "yesterday"}, "date_from: Enter a valid date."),
    ("/groups/", {"page": "-1"}, f"page: {PAGE_WORDS}"),
    ("/topics/", {"page": "1.5"}, f"page: {PAGE_WORDS}"),
], ids=lambda value: value if isinstance(value, str) else "&".join(f"{k}={v}" for k, v in value.items()))
def test_a_bad_filter_or_page_is_a_400_saying_what_is_wrong_never_ignored(approver_client, lists, path, query, says):
    response = approver_client.get(path, query)
    assert response.status_code == 400
    assert says in response.content.decode()


def test_a_page_past_the_last_shows_the_last(viewer_client, lists):
    response = viewer_client.get("/groups/", {"page": "99"})
    assert response.status_code == 200 and listed_group_ids(response.content.decode()) == ["busy", "idle", "lossy"]


def test_the_live_parts_of_a_list_answer_bad_filters_with_a_400_too(viewer_client, lists):
    # live.js keeps what it shows when a refresh is not answered with 200.
    assert viewer_client.get("/findings/table", {"view": "partitions", "state": "bogus"}).status_code == 400
    assert viewer_client.get("/jobs/live", {"status": "bogus"}).status_code == 400
