"""Team scopes (issue 23, item 4): a role limited to clusters and to group-id
and topic patterns, enforced the same way on pages, the API, bulk
selections, the admin and /metrics; the audit row names the identity and
the grant; four-eyes needs two people."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from groups.models import AuditEvent, Finding, RemediationJob, RoleMapping
from groups.services.identity import Identity, identity_login
from groups.services.tokens import api_token_create
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role

pytestmark = pytest.mark.django_db
ISSUER = "https://idp.example.test/realms/acme"


def person(username: str, *groups: str, email: str = "", staff: bool = False):
    """Someone who logged in through the provider with these directory groups."""
    user = get_user_model().objects.create_user(username, email=email or f"{username}@example.test",
                                                is_staff=staff)
    identity_login(user=user, identity=Identity(source="oidc", issuer=ISSUER, subject=f"sub-{username}",
                                                username=username, groups=groups))
    return user


@pytest.fixture
def world(db):
    """Two clusters; on prod-eu a payments group and an orders group, on stage
    a payments group; each with a gap on topic payments or orders. The
    payments team approves payments-* on prod-eu and reads the orders* topics
    of prod-* clusters."""
    RoleMapping.objects.create(directory_group="payments-oncall", role="approver", clusters="prod-eu",
                               group_pattern="payments-*", topic_pattern="*")
    RoleMapping.objects.create(directory_group="payments-oncall", role="viewer", clusters="prod-*",
                               group_pattern="*", topic_pattern="orders*")
    prod, stage = make_cluster("prod-eu"), make_cluster("stage")
    rows = {}
    for cluster, group_id, topic_name in [(prod, "payments-api", "payments"), (prod, "orders-api", "orders"),
                                          (stage, "payments-api", "payments"), (prod, "billing", "ledger")]:
        topic = make_topic(cluster, topic_name)
        rows[(cluster.name, group_id)] = make_finding(make_group(cluster, group_id), make_generation(topic))
    return rows


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_pages_show_what_the_scope_reads_and_buttons_only_where_it_acts(world):
    mine, readable = world[("prod-eu", "payments-api")], world[("prod-eu", "orders-api")]
    other_cluster, unrelated = world[("stage", "payments-api")], world[("prod-eu", "billing")]
    client = client_of(person("pia", "payments-oncall"))
    flat = client.get("/", {"view": "partitions"}).content.decode()
    shown = {int(i) for i in re.findall(r"<tr data-finding=\"(\d+)\"", flat)}
    assert shown == {mine.id, readable.id}
    assert f"/findings/reset?ids={mine.id}" in flat and f"/findings/reset?ids={readable.id}" not in flat
    assert client.get(f"/findings/{mine.id}/").status_code == 200
    page = client.get(f"/findings/{readable.id}/").content.decode()
    assert "Dismiss this finding" not in page and "Look at the missed records" not in page
    for hidden in (other_cluster, unrelated):
        assert client.get(f"/findings/{hidden.id}/").status_code == 404
        assert client.get(f"/findings/reset?ids={hidden.id}").status_code == 404
        assert client.get(f"/findings/{hidden.id}/dismiss").status_code == 404
    triage = client.get("/").content.decode()
    assert '<section class="triage-cluster" data-cluster="prod-eu">' in triage
    assert '<section class="triage-cluster" data-cluster="stage">' not in triage and "billing" not in triage
    # A group is listed where a grant's clusters and group pattern cover it (the reading
    # grant covers every group of prod-*); topic patterns narrow findings, topics and lag.
    groups = client.get("/groups/").content.decode()
    assert "payments-api" in groups and "billing" in groups and "stage" not in groups
    assert client.get(f"/groups/{other_cluster.group_id}/").status_code == 404
    assert client.get(f"/topics/{other_cluster.topic_id}/").status_code == 404
    billing = client.get(f"/groups/{unrelated.group_id}/", follow=True).content.decode()
    assert f"/findings/{unrelated.id}/" not in billing, "its finding on a topic outside the scope stays hidden"
    clusters = client.get("/clusters/").content.decode()
    assert "prod-eu" in clusters and "Add a cluster" not in clusters


def test_acting_outside_the_scope_is_refused_in_every_way(world):
    pia = person("pia", "payments-oncall")
    mine, readable = world[("prod-eu", "payments-api")], world[("prod-eu", "orders-api")]
    client = client_of(pia)
    response = client.post(f"/findings/{readable.id}/dismiss/confirm", {"reason": "not mine"})
    assert response.status_code == 403
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=pia, name='ci')[1]}")
    for path, body in [(f"/api/v1/findings/{readable.id}/dismiss", {"reason": "x"}),
                       (f"/api/v1/findings/{readable.id}/approve", {"kind": "reset", "target": "earliest"})]:
        answer = api.post(path, json.dumps(body), content_type="application/json")
        assert answer.status_code == 403 and "outside your scope" in answer.json()["error"], answer.content
    result = api.post("/api/v1/findings/dismiss", json.dumps({"ids": [mine.id, readable.id], "reason": "noise"}),
                      content_type="application/json").json()
    assert result["dismissed"] == [mine.id]
    assert [r["id"] for r in result["refused"]] == [readable.id] and "outside your scope" in result["refused"][0]["error"]
    assert Finding.objects.get(id=readable.id).closed_at is None
    assert not RemediationJob.objects.exists()


def test_bulk_approve_refuses_finding_by_finding(world, settings, enqueued):
    pia = person("pia", "payments-oncall")
    mine, readable = world[("prod-eu", "payments-api")], world[("prod-eu", "orders-api")]
    hidden = world[("stage", "payments-api")]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=pia, name='ci')[1]}")
    answer = api.post("/api/v1/findings/approve", json.dumps({"kind": "reset", "ids": [mine.id, readable.id,
                                                                                          hidden.id]}),
                      content_type="application/json")
    assert answer.status_code == 200, answer.content
    result = answer.json()
    assert [j["finding"] for j in result["jobs"]] == [mine.id]
    refused = {r["id"]: r["error"] for r in result["refused"]}
    assert "outside your scope" in refused[readable.id] and refused[hidden.id] == "no such finding"


def test_the_audit_names_the_identity_and_the_grant(world, enqueued):
    pia = person("pia", "payments-oncall")
    mine = world[("prod-eu", "payments-api")]
    answer = client_of(pia).post(f"/api/v1/findings/{mine.id}/approve", json.dumps({"kind": "reset",
                                                                                    "target": "earliest"}),
                                 content_type="application/json")
    assert answer.status_code == 201, answer.content
    detail = AuditEvent.objects.get(action="job.requested").detail
    mapping = RoleMapping.objects.get(role="approver")
    assert detail["identity"] == {"source": "oidc", "issuer": ISSUER, "subject": "sub-pia", "username": "pia"}
    assert detail["scope"] == [f"role mapping {mapping.id}: payments-oncall"]


def test_the_api_lists_and_metrics_are_limited_to_the_scope(world, client):
    pia = person("pia", "payments-oncall")
    key = api_token_create(user=pia, name="ci")[1]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    findings = {row["id"] for row in api.get("/api/v1/findings").json()["results"]}
    assert findings == {world[("prod-eu", "payments-api")].id, world[("prod-eu", "orders-api")].id}
    groups = {(row["cluster"], row["group_id"]) for row in api.get("/api/v1/groups").json()["results"]}
    assert groups == {("prod-eu", "payments-api"), ("prod-eu", "orders-api"), ("prod-eu", "billing")}
    topics = {(row["cluster"], row["name"]) for row in api.get("/api/v1/topics").json()["results"]}
    assert topics == {("prod-eu", "payments"), ("prod-eu", "orders"), ("prod-eu", "ledger")}
    assert api.get(f"/api/v1/findings/{world[('prod-eu', 'billing')].id}").status_code == 404
    metrics = api.get("/metrics", REMOTE_ADDR="203.0.113.9").content.decode()
    assert 'group="payments-api"' in metrics and 'group="billing"' not in metrics
    # Everyone unscoped (here: from loopback, no credentials) sees every group.
    assert 'group="billing"' in client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()


def test_the_admin_lists_only_the_scope(world):
    staff = person("sam", "payments-oncall", staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_finding", "view_consumergroup"]))
    page = client_of(staff).get("/admin/groups/finding/").content.decode()
    assert "payments-api" in page and "billing" not in page


def test_a_team_approver_changes_its_groups_settings_but_not_clusters(world):
    pia = person("pia", "payments-oncall")
    client = client_of(pia)
    mine = world[("prod-eu", "payments-api")].group
    readable = world[("prod-eu", "orders-api")].group
    form = {"declared_policy": "latest", "backfill_sink": "parquet", "replay_topic": ""}
    assert client.post(f"/groups/{mine.id}/settings", form).status_code == 302
    assert client.post(f"/groups/{readable.id}/settings", form).status_code == 403
    assert client.get("/clusters/add").status_code == 403


def test_four_eyes_needs_two_people_not_two_accounts(world, settings, enqueued):
    settings.FOUR_EYES = True
    mine = world[("prod-eu", "payments-api")]
    pia = person("pia", "payments-oncall", email="pia@example.test")
    local_pia = user_with_role("pia-breakglass", "approver")
    local_pia.email = "PIA@example.test"
    local_pia.save()
    answer = client_of(pia).post(f"/api/v1/findings/{mine.id}/approve", json.dumps({"kind": "reset",
                                                                                    "target": "earliest"}),
                                 content_type="application/json")
    job_id = answer.json()["id"]
    refused = client_of(local_pia).post(f"/jobs/{job_id}/approve")
    assert refused.status_code == 403
    assert RemediationJob.objects.get(id=job_id).status == "requested"
    other = person("olga", "payments-oncall")
    assert client_of(other).post(f"/jobs/{job_id}/approve").status_code == 302
    assert RemediationJob.objects.get(id=job_id).status == "approved"
