"""The record viewer (issue 22, item 3) on the real stack: a real broker, a
real Celery worker reading with the cluster's settings, PostgreSQL for the
audit trail. An approver sees the first and last records of a finding's
missed range, keys, values and headers as text or hex, hostile text escaped;
nobody else does; every look is audited without its contents; the records
are kept nowhere (no-store, no audit detail, the worker's answer ciphertext
for the result backend and Celery's log, and deleted once read)."""

from __future__ import annotations

import json
import re

import pytest
import redis
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from groups.models import AuditEvent, Cluster
from tests.factories import make_finding, make_generation, make_group, make_topic, user_with_role
from tasks.read_records import read_records
from tests.harness.pages import client_for

SECRET_VALUE = "card=4111-1111-1111-1111"


@pytest.fixture
def missed_records(broker, unique, kafka_bootstrap, transactional_db):
    """Partition 0 of a new topic holds 30 records; a gap finding says [0, 30)
    was missed. Record 1 is binary with a header, 28 is hostile text."""
    name = f"viewer-{unique}"
    broker.create_topic(name, 1)
    for number in range(30):
        value: bytes | str = f"order-{number}"
        key: bytes | str | None = f"k-{number}"
        headers = None
        if number == 1:
            value, key, headers = b"\x00\xff\x10binary", None, [("trace", b"abc"), ("raw", b"\xfe")]
        elif number == 28:
            value = "<script>alert(1)</script>"
        elif number == 29:
            value = SECRET_VALUE
        broker.producer.produce(name, key=key, value=value, partition=0, headers=headers)
    assert broker.producer.flush(30) == 0
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    topic = make_topic(cluster, name)
    return make_finding(make_group(cluster, "billing"), make_generation(topic, 2, (0,)), 0, first_log_start=0,
                        log_start_offset=0, high_watermark=30, committed_offset=30, backfill_start=0,
                        backfill_end=30, missed_definite=28, missed_possible=2)


def test_an_approver_reads_the_first_and_last_records_of_the_missed_range(missed_records, celery_worker_thread):
    approver = user_with_role("approver", "approver")
    client = client_for(approver, csrf=True)
    url = f"/findings/{missed_records.id}/records"
    form = client.get(url)
    assert form.status_code == 200 and "[0, 30)" in form.content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.content.decode()).group(1)

    store = redis.Redis.from_url(settings.CELERY_RESULT_BACKEND)
    results_before = set(store.scan_iter("celery-task-meta-*"))
    response = client.post(url, {"count": "3", "csrfmiddlewaretoken": token})
    body = response.content.decode()
    assert response.status_code == 200, body
    assert "no-store" in response.headers["Cache-Control"]
    assert re.findall(r'data-offset="(\d+)"', body) == ["0", "1", "2", "27", "28", "29"]
    assert "… offsets 3 to 26 not shown" in body
    row = re.search(r'data-offset="1">.*?</tr>', body, re.S).group(0)
    assert "00 ff 10 62 69 6e 61 72 79" in row and "(hex)" in row and ">null<" in row  # binary value, null key
    assert 'trace</code>: <code class="record-bytes">abc</code>' in row
    assert 'fe</code> <span class="muted">(hex)' in row
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert SECRET_VALUE in body

    # Kept nowhere: not in the audit row, not in what the worker logged, not in Redis.
    event = AuditEvent.objects.get(action="finding.records_viewed")
    assert event.actor == approver and event.object_id == str(missed_records.id)
    assert event.detail == {"topic": missed_records.topic.name, "partition": 0, "range": [0, 30], "first_and_last": 3}
    assert set(store.scan_iter("celery-task-meta-*")) == results_before  # the worker's answer, deleted once read


def test_the_workers_answer_is_ciphertext_only_the_request_can_read(missed_records):
    """What Celery stores as the task's result and logs as its return value."""
    key = Fernet.generate_key()
    sealed = read_records(missed_records.cluster_id, missed_records.topic.name, 0, 27, 30, 3, key.decode())
    assert SECRET_VALUE not in sealed and "order-" not in sealed
    records = json.loads(Fernet(key).decrypt(sealed.encode()))["records"]
    assert [r["offset"] for r in records] == [27, 28, 29] and records[-1]["value"]["shown"] == SECRET_VALUE
    with pytest.raises(InvalidToken):
        Fernet(Fernet.generate_key()).decrypt(sealed.encode())


def test_only_approvers_read_records_and_bad_input_reads_nothing(missed_records):
    viewer = client_for(user_with_role("viewer", "viewer"))
    url = f"/findings/{missed_records.id}/records"
    assert viewer.get(url).status_code == 403
    assert viewer.post(url, {"count": "3"}).status_code == 403
    approver = client_for(user_with_role("approver", "approver"))
    for count in ("0", "51", "-1", "2.5", "three"):
        response = approver.post(url, {"count": count})
        assert response.status_code == 400, count
        assert "count is a whole number from 1 to 50" in response.content.decode()
    assert approver.post(url, {"count": "3\x00"}).status_code == 400  # refused before any view
    assert approver.get("/findings/999999/records").status_code == 404
    assert not AuditEvent.objects.filter(action="finding.records_viewed").exists()


def test_an_unreachable_cluster_is_a_clear_error_and_the_look_is_still_audited(missed_records,
                                                                               celery_worker_thread, settings):
    settings.KAFKA_TIMEOUT_SECONDS = 2
    Cluster.objects.filter(id=missed_records.cluster_id).update(bootstrap_servers="127.0.0.1:1")
    approver = client_for(user_with_role("approver", "approver"))
    response = approver.post(f"/findings/{missed_records.id}/records", {"count": "3"})
    assert response.status_code == 502
    assert "the records could not be read" in response.content.decode()
    assert AuditEvent.objects.filter(action="finding.records_viewed").count() == 1
