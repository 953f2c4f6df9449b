"""Browse pages: topic, group, clusters, audit. Real PostgreSQL; the connection
test runs on a real Celery worker against the real broker."""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from groups.cluster_forms import normalize_bootstrap_servers
from groups.models import (
    AuditEvent,
    Cluster,
    ConsumerGroup,
    Finding,
    GroupTopic,
    LagSample,
    PartitionGeneration,
    Topic,
)
from groups.web.links import group_url, topic_url
from tests.factories import user_with_role
from tests.harness.kafka_clients import wait_until

SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '" onmouseover="x'
HOSTILE = (SCRIPT, ATTRIBUTE)
ESCAPED = {SCRIPT: "&lt;script&gt;alert(1)&lt;/script&gt;", ATTRIBUTE: "&quot; onmouseover=&quot;x"}
PASSWORD = "s3cret-PASS-never-shown"


@pytest.fixture
def sasl_cluster(db):
    """Cluster `local` behind SASL/PLAIN, its password stored (these pages never show it)."""
    cluster = Cluster.objects.create(
        name="local", bootstrap_servers="127.0.0.1:9092", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_username="gapwatch",
    )
    cluster.set_sasl_password(PASSWORD)
    cluster.save()
    return cluster


def make_world(cluster: Cluster, *, partitions: int = 4, samples: int = 10, group_id: str = SCRIPT,
               topic_name: str = ATTRIBUTE) -> dict:
    """A topic that grew from 2 to ``partitions`` partitions, a group reading
    it with an open finding on every new partition, and lag samples."""
    now = timezone.now()
    topic = Topic.objects.create(cluster=cluster, name=topic_name, kafka_topic_id="tid-1",
                                 partition_count=partitions, first_seen_at=now, updated_at=now)
    first = PartitionGeneration.objects.create(topic=topic, number=1, kafka_topic_id="tid-1", partitions=[0, 1],
                                               observed_at=now - timedelta(hours=2))
    grown = PartitionGeneration.objects.create(
        topic=topic, number=2, kafka_topic_id="tid-1", partitions=list(range(partitions)),
        added_partitions=list(range(2, partitions)), observed_at=now - timedelta(hours=1),
    )
    group = ConsumerGroup.objects.create(cluster=cluster, group_id=group_id, state="Stable", type="classic",
                                         assignor="range", member_count=3, first_seen_at=now, last_seen_at=now)
    GroupTopic.objects.create(group=group, topic=topic, lag=4242, first_seen_at=now, updated_at=now)
    for partition in range(2, partitions):
        Finding.objects.create(
            cluster=cluster, group=group, topic=topic, partition=partition, generation=grown, state="gap",
            created_at=now, updated_at=now, first_log_start=0, log_start_offset=7, high_watermark=1000 + partition,
            committed_offset=900 + partition, lag=100, owner_client_id=SCRIPT, owner_host=ATTRIBUTE,
            missed_definite=11, missed_possible=22,
        )
    LagSample.objects.bulk_create(
        LagSample(group=group, topic=topic, at=now - timedelta(seconds=10 * i), lag=i % 500) for i in range(samples)
    )
    return {"topic": topic, "group": group, "generations": (first, grown)}


def assert_escaped(body: str, *values: str) -> None:
    for value in values:
        assert value not in body, f"raw {value!r} in the page"
        assert ESCAPED[value] in body, f"escaped {value!r} missing"


def state_changing_urls(cluster: Cluster, group: ConsumerGroup) -> dict[str, dict]:
    return {
        f"/groups/{group.pk}/settings": {"declared_policy": "earliest", "backfill_sink": "parquet"},
        "/clusters/add": {"name": "other", "bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"},
        f"/clusters/{cluster.pk}/edit": {"bootstrap_servers": "127.0.0.1:9093", "security_protocol": "PLAINTEXT"},
        f"/clusters/{cluster.pk}/toggle": {"enabled": "false"},
        f"/clusters/{cluster.pk}/test": {},
    }


@pytest.mark.parametrize(("value", "expected"), [
    ("broker:9092", "broker:9092"),
    (" a.example.com:9092 , 10.0.0.1:9093", "a.example.com:9092,10.0.0.1:9093"),
    ("[::1]:9092", "[::1]:9092"),
    ("broker", None),  # no port
    ("broker:0", None),  # port out of range
    ("broker:70000", None),
    ("a:1,,b:2", None),  # empty entry
    ("<script>:1", None),
    ("", None),
])
def test_it_validates_bootstrap_servers_as_host_port_list(value, expected):
    from django.forms import ValidationError

    if expected is None:
        with pytest.raises(ValidationError):
            normalize_bootstrap_servers(value)
    else:
        assert normalize_bootstrap_servers(value) == expected


@pytest.mark.django_db
def test_it_sends_anonymous_users_to_login(client, sasl_cluster):
    world = make_world(sasl_cluster)
    pages = [f"/topics/{world['topic'].pk}/", f"/groups/{world['group'].pk}/", topic_url(world['topic']),
             group_url(world['group']), "/clusters/", "/clusters/local/", "/audit/",
             "/audit/export.csv", "/clusters/add", f"/clusters/{sasl_cluster.pk}/edit"]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    for url, data in state_changing_urls(sasl_cluster, world["group"]).items():
        response = client.post(url, data)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_it_forbids_viewers_every_state_changing_url(viewer_client, sasl_cluster):
    world = make_world(sasl_cluster)
    for url, data in state_changing_urls(sasl_cluster, world["group"]).items():
        assert viewer_client.post(url, data).status_code == 403, url
    for url in ("/clusters/add", f"/clusters/{sasl_cluster.pk}/edit"):
        assert viewer_client.get(url).status_code == 403, url
    sasl_cluster.refresh_from_db()
    world["group"].refresh_from_db()
    assert (sasl_cluster.enabled, sasl_cluster.bootstrap_servers, world["group"].declared_policy) == (
        True, "127.0.0.1:9092", "unknown"
    )
    assert Cluster.objects.count() == 1 and not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_it_answers_get_on_post_only_urls_with_405(approver_client, viewer_client, sasl_cluster):
    world = make_world(sasl_cluster)
    for url in (f"/groups/{world['group'].pk}/settings", f"/clusters/{sasl_cluster.pk}/toggle",
                f"/clusters/{sasl_cluster.pk}/test"):
        assert approver_client.get(url).status_code == 405, url
        assert viewer_client.get(url).status_code == 405, url


@pytest.mark.django_db
def test_it_rejects_a_post_without_csrf_token(approver, sasl_cluster):
    world = make_world(sasl_cluster)
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    for url, data in state_changing_urls(sasl_cluster, world["group"]).items():
        assert client.post(url, data).status_code == 403, url
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_it_shows_the_partition_generation_timeline_and_the_readers_of_a_topic(viewer_client, sasl_cluster):
    world = make_world(sasl_cluster, partitions=6)
    now = timezone.now()
    PartitionGeneration.objects.create(topic=world["topic"], number=3, kafka_topic_id="tid-2", partitions=[0, 1, 2],
                                       is_new_lineage=True, observed_at=now)
    quiet = ConsumerGroup.objects.create(cluster=sasl_cluster, group_id=ATTRIBUTE, first_seen_at=now, last_seen_at=now)
    GroupTopic.objects.create(group=quiet, topic=world["topic"], lag=0, first_seen_at=now, updated_at=now)

    response = viewer_client.get(topic_url(world['topic']))
    body = response.content.decode()
    assert response.status_code == 200
    assert "First seen with 2 partitions." in body
    assert "2 → 6 partitions." in body and "Added: 2–5" in body
    assert "New lineage:" in body and "6 → 3 partitions" in body and "tid-2" in body
    # Newest generation first; readers by lag, linked by name.
    assert body.index("Generation 3") < body.index("Generation 2") < body.index("Generation 1")
    group_links = [html.unescape(link) for link in re.findall(r'href="(/clusters/[^"]*/groups/[^"]*)"', body)]
    assert group_links == [group_url(world["group"]), group_url(quiet)]
    assert ">4242<" in body
    assert_escaped(body, SCRIPT, ATTRIBUTE)


@pytest.mark.django_db
def test_it_shows_the_group_with_its_partitions_and_a_lag_chart(viewer_client, sasl_cluster):
    world = make_world(sasl_cluster, partitions=4, samples=50)
    response = viewer_client.get(group_url(world['group']))
    body = response.content.decode()
    assert response.status_code == 200
    for fact in ("Stable", "classic", "range", ">3<"):
        assert fact in body
    # One topic row with the total lag; the partitions stored for the group (none here: a
    # GroupTopic written without them), and each partition with an open finding.
    assert body.count('class="topic-row"') == 1 and body.count('class="partition-row"') == 2
    assert ">902<" in body and ">1002<" in body and ">903<" in body and ">1003<" in body
    assert "Every partition of each topic the group reads" in body
    # Viewers see the policy read-only.
    assert 'action="/groups/' not in body and "Only approvers can change these." in body
    svg = body[body.index("<svg"):body.index("</svg>")]
    assert len(re.findall(r"<polyline", svg)) == 1
    assert "messages behind" in svg and "time (UTC)" in svg
    assert_escaped(svg, SCRIPT)
    assert_escaped(body, SCRIPT, ATTRIBUTE)


@pytest.mark.django_db
def test_it_downsamples_the_lag_chart_to_at_most_300_points(viewer_client, sasl_cluster):
    world = make_world(sasl_cluster, samples=8000)  # one sample every 10 s: 22 hours
    body = viewer_client.get(group_url(world['group']), {"window": "24h"}).content.decode()
    points = re.search(r'<polyline class="series series-0" points="([^"]*)"', body)[1].split()
    assert 200 < len(points) <= 300
    # An unknown window falls back to the default one.
    fallback = viewer_client.get(group_url(world['group']), {"window": "bogus"}).content.decode()
    assert '<option value="fit" selected>' in fallback


@pytest.mark.django_db
def test_it_keeps_the_group_page_queries_constant_as_partitions_and_samples_grow(
    viewer_client, sasl_cluster, django_assert_max_num_queries
):
    small = make_world(sasl_cluster, partitions=3, samples=2, group_id="small", topic_name="small")
    large = make_world(sasl_cluster, partitions=120, samples=5000, group_id="large", topic_name="large")
    counts = []
    for world in (small, large):
        viewer_client.get(group_url(world['group']))  # warm the session and permission caches alike
        with CaptureQueriesContext(connection) as queries:
            assert viewer_client.get(group_url(world['group'])).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    # 13: the page's own queries, the header's one of the clusters' freshness, and the two
    # that find where the chart's events and samples begin (its window fits them).
    # 15: the page's, and two for the person's team scope (directory identity, roles).
    # 16: and the person's time zone, read by the layout (issue 44, item 3).
    with django_assert_max_num_queries(16):
        viewer_client.get(group_url(large['group']))


@pytest.mark.django_db
def test_it_lets_approvers_change_the_group_policy_and_audits_before_and_after(approver_client, approver, sasl_cluster):
    world = make_world(sasl_cluster)
    group = world["group"]
    page = approver_client.get(group_url(group)).content.decode()
    assert f'action="/groups/{group.pk}/settings"' in page
    response = approver_client.post(f"/groups/{group.pk}/settings", {
        "declared_policy": "earliest", "auto_repair": "on", "backfill_sink": "kafka", "replay_topic": "orders.replay",
    })
    assert response.status_code == 302 and response["Location"] == group_url(group)
    group.refresh_from_db()
    assert (group.declared_policy, group.auto_repair, group.backfill_sink, group.replay_topic) == (
        "earliest", True, "kafka", "orders.replay"
    )
    event = AuditEvent.objects.get(action="group.changed")
    assert (event.actor, event.cluster, event.object_type, event.object_id) == (approver, sasl_cluster, "group",
                                                                                str(group.pk))
    assert event.detail == {
        "group": SCRIPT,
        "before": {"declared_policy": "unknown", "auto_repair": False, "backfill_sink": "parquet", "replay_topic": ""},
        "after": {"declared_policy": "earliest", "auto_repair": True, "backfill_sink": "kafka",
                  "replay_topic": "orders.replay"},
    }
    audit_page = approver_client.get("/audit/?object_type=group").content.decode()
    assert '<dt>declared policy</dt><dd class="hostile">unknown → earliest</dd>' in audit_page
    assert f'href="{html.escape(group_url(group))}"' in audit_page
    # The same settings again change nothing and write no second row.
    approver_client.post(f"/groups/{group.pk}/settings", {
        "declared_policy": "earliest", "auto_repair": "on", "backfill_sink": "kafka", "replay_topic": "orders.replay",
    })
    assert AuditEvent.objects.filter(action="group.changed").count() == 1


@pytest.mark.django_db
def test_it_lets_approvers_declare_the_isolation_level_and_leaves_it_when_a_form_omits_it(
    approver_client, sasl_cluster
):
    """Issue 32: the consumers' isolation.level, declared as the policy is;
    a request without the field (a form older than it) leaves it as it is."""
    group = make_world(sasl_cluster)["group"]
    form = {"declared_policy": "unknown", "backfill_sink": "parquet", "replay_topic": ""}
    response = approver_client.post(f"/groups/{group.pk}/settings", {**form, "declared_isolation": "read_uncommitted"})
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.declared_isolation == "read_uncommitted"
    event = AuditEvent.objects.get(action="group.changed")
    assert (event.detail["before"], event.detail["after"]) == (
        {"declared_isolation": "unknown"}, {"declared_isolation": "read_uncommitted"})
    approver_client.post(f"/groups/{group.pk}/settings", form)
    group.refresh_from_db()
    assert group.declared_isolation == "read_uncommitted" and AuditEvent.objects.count() == 1
    response = approver_client.post(f"/groups/{group.pk}/settings", {**form, "declared_isolation": "sometimes"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert "Declared isolation.level" in approver_client.get(group_url(group)).content.decode()


@pytest.mark.django_db
def test_it_rejects_invalid_group_settings_and_shows_the_errors(approver_client, sasl_cluster):
    group = make_world(sasl_cluster)["group"]
    response = approver_client.post(f"/groups/{group.pk}/settings", {
        "declared_policy": "sometimes", "backfill_sink": "kafka", "replay_topic": "",
    })
    body = response.content.decode()
    assert response.status_code == 400
    assert "Select a valid choice" in body and "The kafka sink needs a replay topic." in body
    group.refresh_from_db()
    assert group.declared_policy == "unknown" and not AuditEvent.objects.exists()
    assert_escaped(body, SCRIPT)


@pytest.mark.django_db
def test_it_adds_a_cluster_and_audits_it_without_the_password(approver_client, approver, db):
    form = approver_client.get("/clusters/add").content.decode()
    assert 'name="sasl_password"' in form and 'type="password"' in form
    response = approver_client.post("/clusters/add", {
        "name": "prod", "bootstrap_servers": "k1.example.com:9092, k2.example.com:9092",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "gw",
        "sasl_password": PASSWORD,
    })
    assert response.status_code == 302 and response["Location"] == "/clusters/"
    cluster = Cluster.objects.get(name="prod")
    assert cluster.bootstrap_servers == "k1.example.com:9092,k2.example.com:9092"
    assert cluster.cluster_config().sasl_password == PASSWORD and PASSWORD not in cluster.sasl_password_encrypted
    event = AuditEvent.objects.get(action="cluster.added")
    assert (event.actor, event.cluster, event.object_id) == (approver, cluster, str(cluster.pk))
    assert event.detail == {
        "before": {},
        "after": {"name": "prod", "bootstrap_servers": "k1.example.com:9092,k2.example.com:9092",
                  "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "gw",
                  "webhook_url": ""},  # the pages edit the webhook too, with the admin's validation
        "password_set": True,
    }
    listing = approver_client.get("/clusters/").content.decode()
    assert "Cluster prod added." in listing and "password set" in listing


@pytest.mark.django_db
def test_it_rejects_a_bad_cluster_form_and_never_echoes_the_password(approver_client, db):
    response = approver_client.post("/clusters/add", {
        "name": "bad", "bootstrap_servers": "broker-without-port", "security_protocol": "SASL_SSL",
        "sasl_mechanism": "", "sasl_username": "", "sasl_password": PASSWORD,
    })
    body = response.content.decode()
    assert response.status_code == 400
    assert "is not host:port" in body and "needs a SASL mechanism" in body and "needs a SASL user" in body
    assert PASSWORD not in body
    plaintext_with_mechanism = approver_client.post("/clusters/add", {
        "name": "bad", "bootstrap_servers": "b:1", "security_protocol": "PLAINTEXT", "sasl_mechanism": "PLAIN",
    })
    assert "needs security protocol SASL_PLAINTEXT or SASL_SSL" in plaintext_with_mechanism.content.decode()
    assert not Cluster.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_it_keeps_changes_and_clears_the_password_and_audits_only_that_it_changed(approver_client, sasl_cluster):
    url = f"/clusters/{sasl_cluster.pk}/edit"
    page = approver_client.get(url).content.decode()
    assert "Stored SASL password: <strong>set</strong>" in page and "Clear the stored password" in page
    common = {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "PLAIN", "sasl_username": "gapwatch"}

    # Empty password input: the stored one stays; only the changed field is audited.
    assert approver_client.post(url, {**common, "sasl_username": "other", "sasl_password": ""}).status_code == 302
    sasl_cluster.refresh_from_db()
    assert sasl_cluster.cluster_config().sasl_password == PASSWORD
    event = AuditEvent.objects.get(action="cluster.changed")
    assert event.detail == {"before": {"sasl_username": "gapwatch"}, "after": {"sasl_username": "other"}}

    # A new password: audited as changed, never its value.
    approver_client.post(url, {**common, "sasl_password": "brand-new-secret"})
    sasl_cluster.refresh_from_db()
    assert sasl_cluster.cluster_config().sasl_password == "brand-new-secret"
    event = AuditEvent.objects.filter(action="cluster.changed").first()
    assert event.detail == {"before": {"sasl_username": "other"}, "after": {"sasl_username": "gapwatch"},
                            "password_changed": True, "password_set": True}

    # Clearing needs a non-SASL protocol (SASL needs a password).
    refused = approver_client.post(url, {**common, "clear_sasl_password": "on"})
    assert refused.status_code == 400 and "needs a password" in refused.content.decode()
    approver_client.post(url, {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT",
                               "sasl_mechanism": "", "sasl_username": "", "clear_sasl_password": "on"})
    sasl_cluster.refresh_from_db()
    assert not sasl_cluster.has_sasl_password and sasl_cluster.security_protocol == "PLAINTEXT"
    event = AuditEvent.objects.filter(action="cluster.changed").first()
    assert event.detail["password_changed"] is True and event.detail["password_set"] is False
    for row in AuditEvent.objects.all():
        assert "secret" not in str(row.detail) and PASSWORD not in str(row.detail)
    # The name is fixed once a cluster exists.
    approver_client.post(url, {"name": "renamed", "bootstrap_servers": "127.0.0.1:9092",
                               "security_protocol": "PLAINTEXT"})
    sasl_cluster.refresh_from_db()
    assert sasl_cluster.name == "local"


@pytest.mark.django_db
def test_it_never_renders_the_password_nor_its_ciphertext(approver_client, viewer_client, sasl_cluster):
    make_world(sasl_cluster)
    ciphertext = sasl_cluster.sasl_password_encrypted
    approver_client.post(f"/clusters/{sasl_cluster.pk}/edit", {
        "bootstrap_servers": "not a host", "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
        "sasl_username": "gapwatch", "sasl_password": PASSWORD,
    })
    approver_client.post(f"/clusters/{sasl_cluster.pk}/edit", {
        "bootstrap_servers": "127.0.0.1:9095", "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
        "sasl_username": "gapwatch", "sasl_password": PASSWORD,
    })
    responses = [
        approver_client.get("/clusters/"), viewer_client.get("/clusters/"),
        approver_client.get(f"/clusters/{sasl_cluster.pk}/edit"),
        approver_client.post(f"/clusters/{sasl_cluster.pk}/edit",
                             {"bootstrap_servers": "x", "sasl_password": PASSWORD}),
        approver_client.get("/audit/"), approver_client.get("/audit/export.csv"),
    ]
    sasl_cluster.refresh_from_db()
    for response in responses:
        body = b"".join(response.streaming_content) if response.streaming else response.content
        for secret in (PASSWORD, ciphertext, sasl_cluster.sasl_password_encrypted):
            assert secret.encode() not in body


@pytest.mark.django_db
def test_it_enables_and_disables_a_cluster_once_per_request(approver_client, approver, sasl_cluster):
    url = f"/clusters/{sasl_cluster.pk}/toggle"
    for _ in range(2):  # a double click
        assert approver_client.post(url, {"enabled": "false"})["Location"] == "/clusters/"
    sasl_cluster.refresh_from_db()
    assert sasl_cluster.enabled is False
    events = list(AuditEvent.objects.filter(action="cluster.changed"))
    assert len(events) == 1
    assert (events[0].actor, events[0].detail) == (approver, {"before": {"enabled": True}, "after": {"enabled": False}})
    page = approver_client.get("/clusters/").content.decode()
    assert "disabled" in page and '<input type="hidden" name="enabled" value="true">' in page
    approver_client.post(url, {"enabled": "true"})
    sasl_cluster.refresh_from_db()
    assert sasl_cluster.enabled is True
    assert approver_client.post(url, {"enabled": "maybe"}).status_code == 400


@pytest.mark.django_db
def test_it_escapes_hostile_names_on_every_page_and_in_the_csv(approver_client, viewer_client, approver, sasl_cluster):
    world = make_world(sasl_cluster)
    Cluster.objects.filter(id=sasl_cluster.id).update(
        bootstrap_servers=SCRIPT, last_error=ATTRIBUTE, last_test_at=timezone.now(), last_test_ok=False,
        last_test_message=SCRIPT,
    )
    client_for = {"viewer": viewer_client, "approver": approver_client}
    approver_client.post(f"/groups/{world['group'].pk}/settings", {"declared_policy": "latest",
                                                                   "backfill_sink": "parquet"})
    for role, client in client_for.items():
        pages = {
            topic_url(world['topic']): HOSTILE, group_url(world['group']): HOSTILE,
            "/clusters/": HOSTILE, "/audit/": (),
        }
        for url, values in pages.items():
            body = client.get(url).content.decode()
            assert SCRIPT not in body and ATTRIBUTE not in body, (role, url)
            assert_escaped(body, *values)
    audit_page = approver_client.get("/audit/?action=group.changed").content.decode()
    # JSON first escapes nothing in the group id; the HTML escaping does.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in audit_page
    edit = approver_client.get(f"/clusters/{sasl_cluster.pk}/edit").content.decode()
    assert_escaped(edit, SCRIPT)
    audit_record_hostile(sasl_cluster)
    content = b"".join(approver_client.get("/audit/export.csv").streaming_content).decode()
    rows = list(csv.reader(io.StringIO(content)))
    cells = [cell for row in rows for cell in row]
    assert any(SCRIPT in cell for cell in cells)  # text, as a CSV cell, not markup
    assert "'=cmd|' /C calc'!A0" in cells and "'+SUM(1)" in cells and "'-3" in cells and "'@x" in cells
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)


def test_the_audit_log_writes_details_in_words_and_links_findings_jobs_and_expansions(approver_client, sasl_cluster):
    from groups.services.audit import audit_record

    audit_record(action="expansion.approved", cluster=sasl_cluster, object_type="expansion", object_id=41,
                 detail={"accepted": True, "committed_at": {"2": 0, "3": 0}, "repaired_after": None})
    audit_record(action="finding.records_viewed", cluster=sasl_cluster, object_type="finding", object_id=42,
                 detail={"range": [0, 30]})
    audit_record(action="job.approved", cluster=sasl_cluster, object_type="job", object_id=43)
    page = approver_client.get("/audit/").content.decode()
    rows = re.findall(r'<dt>([^<]*)</dt><dd class="hostile">([^<]*)</dd>', page)
    assert ("accepted", "yes") in rows and ("committed at", "2: 0; 3: 0") in rows
    assert ("repaired after", "none") in rows and ("range", "0, 30") in rows
    for raw in ("True", "None", "{&#x27;", "repaired_after"):
        assert raw not in page, raw
    for link in ('href="/expansions/41/"', 'href="/findings/42/"', 'href="/jobs/43/"'):
        assert link in page, link


def audit_record_hostile(cluster: Cluster) -> None:
    from groups.services.audit import audit_record

    audit_record(action="=cmd|' /C calc'!A0", cluster=cluster, object_type="+SUM(1)", object_id="-3",
                 detail={"note": ATTRIBUTE})
    audit_record(action="@x", cluster=cluster, detail={"group": SCRIPT})


@pytest.mark.django_db
def test_it_filters_and_paginates_the_audit_log_and_exports_the_same_rows(approver_client, approver, viewer,
                                                                          sasl_cluster):
    from groups.services.audit import audit_record

    other = Cluster.objects.create(name="other", bootstrap_servers="127.0.0.1:9092")
    for i in range(60):
        audit_record(action="cluster.changed", actor=approver, cluster=sasl_cluster, object_type="cluster",
                     object_id=sasl_cluster.pk, detail={"i": i})
    audit_record(action="finding.created", cluster=other, detail={"group": "g"})
    old = audit_record(action="job.approved", actor=viewer, cluster=other, object_type="job", object_id=7)
    AuditEvent.objects.filter(id=old.id).update(at=timezone.now() - timedelta(days=10))

    first = approver_client.get("/audit/?action=cluster.changed").content.decode()
    assert "page 1 of 2 (60 rows)" in first and first.count("<code>cluster.changed</code>") == 50
    second = approver_client.get("/audit/?action=cluster.changed&page=2").content.decode()
    assert "page 2 of 2 (60 rows)" in second and '<dt>i</dt><dd class="hostile">0</dd>' in second
    assert "(1 rows)" in approver_client.get("/audit/?actor=system").content.decode()
    assert "(1 rows)" in approver_client.get(f"/audit/?cluster={other.pk}&object_type=job").content.decode()
    day = (timezone.now() - timedelta(days=10)).date().isoformat()
    by_date = approver_client.get(f"/audit/?date_from={day}&date_to={day}").content.decode()
    assert "(1 rows)" in by_date and 'href="/jobs/7/"' in by_date
    assert "The end date is before the start date." in approver_client.get(
        "/audit/?date_from=2026-02-02&date_to=2026-01-01"
    ).content.decode()
    # One object's trail, as the finding, job and expansion pages link it; an id needs its type.
    trail = approver_client.get("/audit/?object_type=job&object_id=7")
    assert trail.status_code == 200 and "(1 rows)" in trail.content.decode()
    assert "(0 rows)" in approver_client.get("/audit/?object_type=job&object_id=8").content.decode()
    alone = approver_client.get("/audit/?object_id=7")
    assert alone.status_code == 400 and "An object id needs its object type" in alone.content.decode()

    export = approver_client.get(f"/audit/export.csv?actor={approver.username}&action=cluster.changed")
    assert export["Content-Type"].startswith("text/csv")
    assert "attachment" in export["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert rows[0] == ["id", "at", "actor", "action", "cluster", "object_type", "object_id", "detail"]
    assert len(rows) == 61 and {row[2] for row in rows[1:]} == {approver.username}
    assert approver_client.get("/audit/export.csv?date_from=yesterday").status_code == 400


def test_it_tests_the_connection_on_a_real_worker(celery_worker_thread, kafka_bootstrap, settings):
    approver = user_with_role("arno", "approver")
    client = Client()
    client.force_login(approver)
    cluster = Cluster.objects.create(name="local", bootstrap_servers=kafka_bootstrap)
    response = client.post(f"/clusters/{cluster.pk}/test")
    assert response.status_code == 302 and response["Location"] == "/clusters/"
    tested = wait_until(lambda: Cluster.objects.filter(id=cluster.id, last_test_at__isnull=False).first(),
                        timeout=60, what="connection test result")
    assert tested.last_test_ok is True and "connected: 1 broker(s)" in tested.last_test_message
    assert AuditEvent.objects.filter(action="cluster.test_requested", actor=approver).count() == 1
    assert AuditEvent.objects.get(action="cluster.tested").detail["ok"] is True
    page = client.get("/clusters/").content.decode()
    assert "Connection test of local queued" in page and '<span class="ok">ok</span>' in page


def test_it_reports_a_failed_connection_test_without_the_password(celery_worker_thread, settings):
    settings.KAFKA_TIMEOUT_SECONDS = 3
    approver = user_with_role("arno", "approver")
    client = Client()
    client.force_login(approver)
    cluster = Cluster(name="nowhere", bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_username="gapwatch")
    cluster.set_sasl_password(PASSWORD)
    cluster.save()
    client.post(f"/clusters/{cluster.pk}/test")
    tested = wait_until(lambda: Cluster.objects.filter(id=cluster.id, last_test_at__isnull=False).first(),
                        timeout=60, what="connection test result")
    assert tested.last_test_ok is False
    assert tested.last_test_message.startswith("cannot reach 127.0.0.1:1")
    assert PASSWORD not in tested.last_test_message
    page = client.get("/clusters/").content.decode()
    assert '<span class="error">failed</span>' in page and "cannot reach 127.0.0.1:1" in page
    assert PASSWORD not in page
