"""Pages named by names (issue 44): a cluster's, a topic's and a group's page
live at /clusters/<cluster>/, .../topics/<topic>/ and .../groups/<group id>/;
any group id round-trips, the old id addresses answer a permanent redirect,
what names nothing is Gapwatch's 404, a recreated topic's older generations
stay reachable, and every link the pages draw is a name address. Real
PostgreSQL; the Django test client decodes paths as a WSGI server does."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from groups.models import AuditEvent, PartitionGeneration, RemediationJob
from groups.web.links import group_url, topic_url
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_group_topic, make_topic

HOSTILE_GROUP_IDS = [
    "<script>alert(1)</script>",  # a "/" inside markup
    "", "with space", "a/b", "a//b", "/leading", "trailing/", ".", "..", "../../admin", "./x", "...",
    "100%", "%2F", "%00", "~", "~2F", "~7E", "a?b#c", "x\\y", "'quote\"", "ü-ñ 日本 😀", "+plus&amp;=",
]
NOT_FOUND = "There is nothing at this address"


@pytest.fixture
def prod(db):
    return make_cluster("prod")


def _hrefs(body: str, kind: str) -> list[str]:
    return [html.unescape(link) for link in re.findall(rf'href="(/clusters/[^"]*/{kind}/[^"]*)"', body)]


def test_it_round_trips_every_group_id_through_its_address(viewer_client, prod):
    orders = make_topic(prod, "orders")
    groups = [make_group(prod, group_id) for group_id in HOSTILE_GROUP_IDS]
    for group in groups:
        make_group_topic(group, orders, lag=1)
    for group in groups:
        url = group_url(group)
        # One path segment, never "." or "..": a browser resolves neither away, nor any "%2E%2E".
        segments = url.split("/")
        assert len(segments) == 6 and segments[:4] == ["", "clusters", "prod", "groups"], url
        assert segments[4] not in (".", "..") and "%2E" not in segments[4].upper(), url
        response = viewer_client.get(url)
        assert response.status_code == 200, (group.group_id, url)
        assert response.context["group"].pk == group.pk, (group.group_id, url)
    # The lists link the same addresses.
    listed = _hrefs(viewer_client.get("/groups/").content.decode(), "groups")
    assert sorted(listed) == sorted(group_url(group) for group in groups)
    on_topic = _hrefs(viewer_client.get(topic_url(orders)).content.decode(), "groups")
    assert sorted(on_topic) == sorted(group_url(group) for group in groups)


def test_it_redirects_the_id_addresses_for_good_keeping_the_query(viewer_client, prod):
    topic = make_topic(prod, "orders")
    group = make_group(prod, "a/b <c>")
    moved = {
        f"/groups/{group.pk}/": group_url(group),
        f"/groups/{group.pk}/?window=24h": f"{group_url(group)}?window=24h",
        f"/topics/{topic.pk}/": topic_url(topic),
        f"/topics/{topic.pk}/?partitions=6": f"{topic_url(topic)}?partitions=6",
        f"/topics/{topic.pk}/broker": f"{topic_url(topic)}broker",
    }
    for old, new in moved.items():
        response = viewer_client.get(old)
        assert response.status_code == 301 and response["Location"] == new, old
    assert viewer_client.get(f"/groups/{group.pk}/", follow=True).context["group"].pk == group.pk
    for unknown in ("/groups/999999/", "/topics/999999/", "/topics/999999/broker"):
        assert viewer_client.get(unknown).status_code == 404, unknown


def test_what_names_nothing_is_gapwatchs_404_and_a_nul_its_400_never_a_500(viewer_client, prod):
    make_topic(prod, "orders")
    make_group(prod, "billing")
    for path in ("/clusters/nope/", "/clusters/prod/topics/nope/", "/clusters/prod/groups/nope/",
                 "/clusters/prod/topics/nope/broker", "/clusters/nope/groups/billing/",
                 "/clusters/prod/groups/~/", "/clusters/prod/groups/~zz/", "/clusters/prod/groups/billing~2",
                 "/clusters/prod/topics/orders/?generation=7", "/clusters/prod/topics/orders/?generation=x"):
        response = viewer_client.get(path)
        assert response.status_code == 404, path
        assert NOT_FOUND in response.content.decode(), path
    # A NUL byte anywhere in a path is refused before routing (controlplane.middleware.RejectNulMiddleware,
    # the one rule for NULs); the converter, which refuses it too, never sees it.
    for path in ("/clusters/prod/groups/bill%00ing/", "/clusters/prod/groups/%00/", "/clusters/pr%00od/",
                 "/clusters/prod/topics/orders%00/"):
        response = viewer_client.get(path)
        assert response.status_code == 400, path
        assert "a NUL byte (\\x00) is not allowed: &#x27;path&#x27;" in response.content.decode(), path


def test_a_recreated_topics_generations_each_stay_reachable_and_the_page_says_which(viewer_client, prod):
    """The topic keeps its one row under its name; a deletion and re-creation is a new lineage among its
    generations. The name address shows the newest; ?generation=N an older one, saying so."""
    topic = make_topic(prod, "orders", kafka_topic_id="tid-2", partition_count=2)
    now = timezone.now()
    for number, tid, partitions, lineage in ((1, "tid-1", [0, 1], False), (2, "tid-1", [0, 1, 2, 3], False),
                                             (3, "tid-2", [0, 1], True)):
        PartitionGeneration.objects.create(topic=topic, number=number, kafka_topic_id=tid, partitions=partitions,
                                           is_new_lineage=lineage, observed_at=now - timedelta(hours=4 - number))
    newest = viewer_client.get(topic_url(topic)).content.decode()
    assert 'data-generation="3">3, the newest' in newest
    older = viewer_client.get(topic_url(topic), {"generation": "2"}).content.decode()
    shown = older[older.index('class="shown-generation"'):older.index("</dd>", older.index('class="shown-generation"'))]
    assert "2, an older one" in shown and "4 partitions" in shown and "tid-1" in shown
    assert "deleted and recreated" in shown and "generation 3" in shown
    assert older.count('aria-current="true"') == 1
    # Each generation of the timeline links itself.
    assert sorted(re.findall(r'href="\?generation=(\d+)"', older)) == ["1", "2", "3", "3"]
    # A deleted topic keeps its page by name too.
    topic.deleted = True
    topic.save()
    gone = viewer_client.get(topic_url(topic)).content.decode()
    assert "3, the newest (the topic is deleted)" in gone

    # A finding links the topic at its own generation.
    finding = make_finding(make_group(prod, "billing"), PartitionGeneration.objects.get(topic=topic, number=2), 2)
    page = viewer_client.get(f"/findings/{finding.id}/").content.decode()
    assert f'href="{topic_url(topic)}?generation=2"' in page


def test_every_link_to_a_topic_group_or_cluster_page_is_by_name(viewer_client, approver, prod):
    topic = make_topic(prod, "orders")
    group = make_group(prod, "<b>billing</b>")
    make_group_topic(group, topic, lag=9)
    finding = make_finding(group, make_generation(topic, 2, (0, 1, 2)), 2, missed_definite=5)
    job = RemediationJob.objects.create(cluster=prod, group=group, kind=RemediationJob.Kind.RESET,
                                        status=RemediationJob.Status.REQUESTED, requested_by=approver)
    for object_type, object_id in (("group", group.pk), ("topic", topic.pk), ("cluster", prod.pk)):
        AuditEvent.objects.create(actor=approver, action=f"{object_type}.changed", cluster=prod,
                                  object_type=object_type, object_id=str(object_id))
    pages = ["/", "/?view=partitions", "/?view=history", "/jobs/", f"/jobs/{job.id}/", f"/findings/{finding.id}/",
             "/groups/", "/topics/", group_url(group), topic_url(topic), "/clusters/", "/clusters/prod/", "/audit/"]
    for path in pages:
        response = viewer_client.get(path)
        assert response.status_code == 200, path
        body = response.content.decode()
        assert not re.search(r'href="/(groups|topics)/\d+/|#cluster-\d', body), path
    audit = viewer_client.get("/audit/").content.decode()
    assert {group_url(group), topic_url(topic), reverse("browse:cluster", args=["prod"])} <= set(
        html.unescape(link) for link in re.findall(r'href="(/clusters/[^"]*)"', audit))
    assert "Cluster prod" in viewer_client.get("/clusters/prod/").content.decode()
