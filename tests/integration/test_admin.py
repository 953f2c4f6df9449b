"""The Django admin: observed state is read-only, secrets are write-only,
hostile group ids are escaped, and a declared policy is audited."""

from __future__ import annotations

import pytest
from django.utils import timezone

from groups.models import AuditEvent, Cluster, ConsumerGroup

HOSTILE = "<script>alert('gw')</script>"


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="local", bootstrap_servers="127.0.0.1:9092")


@pytest.mark.django_db
def test_it_never_renders_the_sasl_password(admin_client, cluster):
    cluster.sasl_mechanism = "PLAIN"
    cluster.set_sasl_password("s3cret-PASS")
    cluster.save()
    body = admin_client.get(f"/admin/groups/cluster/{cluster.id}/change/").content.decode()
    assert "s3cret-PASS" not in body and cluster.sasl_password_encrypted not in body


@pytest.mark.django_db
def test_it_keeps_the_password_when_the_field_is_left_empty(admin_client, cluster):
    cluster.set_sasl_password("keep-me")
    cluster.save()
    response = admin_client.post(f"/admin/groups/cluster/{cluster.id}/change/", {
        "name": "local", "bootstrap_servers": "127.0.0.1:9093", "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "", "enabled": "on", "webhook_url": "",
    })
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.bootstrap_servers == "127.0.0.1:9093"
    assert cluster.client_config().sasl_password == "keep-me"


@pytest.mark.django_db
def test_it_escapes_hostile_group_ids_and_audits_a_declared_policy(admin_client, admin_user, cluster):
    now = timezone.now()
    group = ConsumerGroup.objects.create(cluster=cluster, group_id=HOSTILE, first_seen_at=now, last_seen_at=now)
    listing = admin_client.get("/admin/groups/consumergroup/").content.decode()
    assert HOSTILE not in listing and "&lt;script&gt;" in listing
    response = admin_client.post(f"/admin/groups/consumergroup/{group.id}/change/", {"declared_policy": "earliest"})
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.declared_policy == "earliest"
    event = AuditEvent.objects.get(action="group.policy_declared")
    assert (event.actor, event.detail) == (admin_user, {"group": HOSTILE, "policy": "earliest"})


@pytest.mark.django_db
def test_findings_cannot_be_edited_in_the_admin(admin_client):
    assert admin_client.get("/admin/groups/finding/add/").status_code == 403


@pytest.mark.django_db
def test_an_api_token_is_shown_once_and_stored_only_as_a_hash(admin_client, admin_user):
    from groups.models import ApiToken

    response = admin_client.post("/admin/groups/apitoken/add/", {"user": admin_user.id, "name": "ci"}, follow=True)
    body = response.content.decode()
    token = ApiToken.objects.get()
    key = body.split("API token for admin: ")[1].split(" ")[0]
    assert key.startswith(token.prefix) and len(key) > 30
    assert key not in admin_client.get("/admin/groups/apitoken/").content.decode()
    assert token.key_hash != key
    from django.test import Client

    assert Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/v1/jobs").status_code == 200


@pytest.mark.django_db
def test_every_model_is_in_the_admin_and_its_list_renders(admin_client):
    from django.apps import apps
    from django.contrib import admin

    from groups.models import JobFinding

    for model in apps.get_app_config("groups").get_models():
        if model is JobFinding:  # shown inline on its job
            continue
        assert admin.site.is_registered(model), model.__name__
        url = f"/admin/groups/{model._meta.model_name}/"
        assert admin_client.get(url).status_code == 200, url
