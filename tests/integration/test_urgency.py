"""Issue 44, item 6: how long retention leaves a finding's missed records,
read from the real broker by the worker's task (``tasks.urgency``) and shown
on the finding page and the triage, which can order by it."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from groups.models import FindingUrgency
from tasks.urgency import read_urgency
from tests.factories import HOSTILE_GROUP_ID, make_finding, make_generation, make_group, make_topic
from tests.harness.pages import client_for

HOUR_MS = 3_600_000
pytestmark = pytest.mark.django_db


@pytest.fixture
def retention_topics(broker, unique):
    """Three topics on the broker: one kept an hour, one kept a week, one
    bounded by size alone; ten records on partition 2 of each."""
    names = {"hour": f"urgency-hour-{unique}", "week": f"urgency-week-{unique}", "size": f"urgency-size-{unique}"}
    configs = {"hour": {"retention.ms": str(HOUR_MS)}, "week": {"retention.ms": str(168 * HOUR_MS)},
               "size": {"retention.ms": "-1", "retention.bytes": "10000000"}}
    for key, name in names.items():
        broker.create_topic(name, 4, config=configs[key])
        broker.produce(name, 2, 10)
    return names


def _finding(cluster, topic_name: str, group_id: str, **fields):
    topic = make_topic(cluster, topic_name)
    return make_finding(make_group(cluster, group_id, state="Stable", member_count=1),
                        make_generation(topic, 2, (0, 1, 2, 3)), 2, **fields)


def test_it_reads_retention_and_the_first_missed_record_and_shows_the_estimate(cluster, retention_topics, viewer):
    before_ms = time.time() * 1000
    hour = _finding(cluster, retention_topics["hour"], HOSTILE_GROUP_ID, backfill_start=3, backfill_end=10)
    size = _finding(cluster, retention_topics["size"], "size-bound", backfill_start=0, backfill_end=10)
    covered = _finding(cluster, retention_topics["week"], "covered-group", state="covered", missed_definite=0,
                       missed_possible=0)

    assert read_urgency(cluster_id=cluster.id, seconds=60) == 2  # the covered finding has nothing to lose

    read = FindingUrgency.objects.get(finding=hour)
    assert (read.retention_ms, read.cleanup_policy, read.first_offset, read.error) == (HOUR_MS, "delete", 3, "")
    assert read.first_timestamp.timestamp() * 1000 <= time.time() * 1000
    assert read.first_timestamp.timestamp() * 1000 >= before_ms - 120_000  # produced by the fixture
    assert read.expires_at == read.first_timestamp + timedelta(hours=1)
    assert not FindingUrgency.objects.filter(finding=covered).exists()

    client = client_for(viewer)
    page = client.get(f"/findings/{hour.id}/").content.decode()
    assert "How long retention leaves it" in page
    assert "1 h (retention.ms=3600000)" in page and "offset 3, stamped" in page
    assert "expires in ~" in page and "(estimate: the earliest retention.ms may delete it" in page
    assert "<script>alert(1)</script>" not in page  # the hostile group id stays text
    sized = client.get(f"/findings/{size.id}/").content.decode()
    assert FindingUrgency.objects.get(finding=size).expires_at is None
    assert "cannot be estimated from time alone" in sized
    assert "How long retention leaves it" not in client.get(f"/findings/{covered.id}/").content.decode()


def test_it_says_a_read_failed_and_the_page_still_answers(cluster, viewer, unique):
    gone = _finding(cluster, f"urgency-never-created-{unique}", "reader")

    read_urgency(cluster_id=cluster.id, seconds=60)

    read = FindingUrgency.objects.get(finding=gone)
    assert read.error and read.expires_at is None
    response = client_for(viewer).get(f"/findings/{gone.id}/")
    assert response.status_code == 200
    assert "the last read failed, so these may be old" in response.content.decode()


def test_the_triage_orders_by_the_soonest_expiry_when_asked(cluster, retention_topics, viewer):
    # The week-long topic's group missed more, so it leads by default; the hour's expires first.
    _finding(cluster, retention_topics["week"], "missesmost", backfill_start=0, backfill_end=10, missed_definite=500)
    _finding(cluster, retention_topics["hour"], "expiresfirst", backfill_start=0, backfill_end=10, missed_definite=5)
    read_urgency(cluster_id=cluster.id, seconds=60)
    client = client_for(viewer)

    default = client.get("/").content.decode()
    assert default.index("missesmost") < default.index("expiresfirst")
    assert "first missed record expires in ~" in default
    by_expiry = client.get("/?sort=expires")
    assert by_expiry.status_code == 200
    text = by_expiry.content.decode()
    assert text.index("expiresfirst") < text.index("missesmost")
    assert client.get("/?sort=bogus").status_code == 400
