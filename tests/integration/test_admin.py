"""The Django admin: observed state is read-only, secrets are write-only,
hostile group ids are escaped, and a declared policy is audited."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from groups.models import AuditEvent, Cluster, ConsumerGroup

HOSTILE = "<script>alert('gw')</script>"


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
    assert cluster.cluster_config().sasl_password == "keep-me"


@pytest.mark.django_db
def test_it_escapes_hostile_group_ids_and_audits_a_declared_policy(admin_client, admin_user, cluster):
    now = timezone.now()
    group = ConsumerGroup.objects.create(cluster=cluster, group_id=HOSTILE, first_seen_at=now, last_seen_at=now)
    listing = admin_client.get("/admin/groups/consumergroup/").content.decode()
    assert HOSTILE not in listing and "&lt;script&gt;" in listing
    response = admin_client.post(f"/admin/groups/consumergroup/{group.id}/change/",
                                 {"declared_policy": "earliest", "declared_isolation": "unknown"})
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.declared_policy == "earliest"
    event = AuditEvent.objects.get(action="group.policy_declared")
    assert (event.actor, event.detail) == (admin_user, {"group": HOSTILE, "policy": "earliest"})
    # The isolation level too, audited alone when only it changes.
    admin_client.post(f"/admin/groups/consumergroup/{group.id}/change/",
                      {"declared_policy": "earliest", "declared_isolation": "read_uncommitted"})
    group.refresh_from_db()
    assert group.declared_isolation == "read_uncommitted"
    event = AuditEvent.objects.filter(action="group.policy_declared").latest("id")
    assert event.detail == {"group": HOSTILE, "isolation": "read_uncommitted"}


@pytest.mark.django_db
def test_findings_cannot_be_edited_in_the_admin(admin_client):
    assert admin_client.get("/admin/groups/finding/add/").status_code == 403


@pytest.mark.django_db
def test_an_api_token_is_shown_once_and_stored_only_as_a_hash(admin_client, admin_user):
    from groups.models import ApiToken

    response = admin_client.post("/admin/groups/apitoken/add/", {"user": admin_user.id, "name": "ci", "days": 7},
                                 follow=True)
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


ADD = "/admin/groups/cluster/add/"
GOOD_CLUSTER = {"name": "east", "bootstrap_servers": "kafka-1:9092,kafka-2:9092", "security_protocol": "PLAINTEXT",
                "sasl_mechanism": "", "sasl_username": "", "sasl_password": "", "enabled": "on", "webhook_url": ""}


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "field"), [
    ({"bootstrap_servers": "not a host list;;"}, "bootstrap_servers"),
    ({"security_protocol": "SASL_SSL"}, "sasl_mechanism"),  # and no user, no password
    ({"webhook_url": "http://127.0.0.1:6379/"}, "webhook_url"),  # the control plane's own Redis
    ({"webhook_url": "http://169.254.169.254/latest/meta-data/"}, "webhook_url"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "u",
      "sasl_password": "p" * 1_000_000}, "sasl_password"),
])
def test_the_admin_validates_a_cluster_as_the_cluster_pages_do(admin_client, change, field):
    response = admin_client.post(ADD, {**GOOD_CLUSTER, **change})
    assert response.status_code == 200  # the form again, with its errors
    assert field in response.context["adminform"].form.errors
    assert not Cluster.objects.filter(name="east").exists()
    assert not AuditEvent.objects.filter(action__startswith="cluster.").exists()


@pytest.mark.django_db
def test_the_admin_writes_clusters_through_the_audited_service(admin_client):
    response = admin_client.post(ADD, {**GOOD_CLUSTER, "webhook_url": "https://hooks.example/gapwatch"})
    assert response.status_code == 302
    cluster = Cluster.objects.get(name="east")
    assert cluster.webhook_url == "https://hooks.example/gapwatch"
    added = AuditEvent.objects.get(action="cluster.added")
    assert added.detail["after"]["bootstrap_servers"] == "kafka-1:9092,kafka-2:9092"
    response = admin_client.post(f"/admin/groups/cluster/{cluster.id}/change/",
                                 {**GOOD_CLUSTER, "bootstrap_servers": "kafka-3:9092", "enabled": "",
                                  "webhook_url": "https://hooks.example/gapwatch"})
    assert response.status_code == 302
    changed = AuditEvent.objects.filter(action="cluster.changed").order_by("id")
    assert [event.detail["after"] for event in changed] == [{"bootstrap_servers": "kafka-3:9092"},
                                                             {"enabled": False}]


@pytest.mark.django_db
def test_a_webhook_whose_name_resolves_to_loopback_is_not_sent(settings):
    from groups.models import Notification
    from tasks.notifications import send_notification

    settings.WEBHOOK_ALLOW_PRIVATE = False
    cluster = Cluster.objects.create(name="local", bootstrap_servers="127.0.0.1:9092")
    # 2130706433 is 127.0.0.1 written as one number: not an address to the URL rule, loopback once resolved.
    notification = Notification.objects.create(cluster=cluster, event="finding.created", url="http://2130706433:6379/",
                                               payload={"x": 1})
    send_notification.apply(args=(notification.id,))
    notification.refresh_from_db()
    assert notification.status == Notification.Status.FAILED
    assert "resolves to 127.0.0.1" in notification.last_error


@pytest.mark.django_db
def test_register_cluster_validates_like_the_form_and_audits_as_the_system():
    with pytest.raises(CommandError, match="bootstrap_servers: “not-a-host-port” is not host:port"):
        call_command("register_cluster", "--name", "prod", "--bootstrap-servers", "not-a-host-port")
    assert not Cluster.objects.exists() and not AuditEvent.objects.exists(), "nothing written"

    call_command("register_cluster", "--name", "prod", "--bootstrap-servers", "127.0.0.1:9092", stdout=StringIO())
    call_command("register_cluster", "--name", "prod", "--bootstrap-servers", "127.0.0.1:9092", stdout=StringIO())
    call_command("register_cluster", "--name", "prod", "--bootstrap-servers", " 10.0.0.1:9092 ", stdout=StringIO())

    assert Cluster.objects.get(name="prod").bootstrap_servers == "10.0.0.1:9092", "normalised by the form"
    events = list(AuditEvent.objects.order_by("id").values_list("action", "actor", "detail"))
    assert events == [
        ("cluster.added", None, {"before": {}, "after": {"name": "prod", "bootstrap_servers": "127.0.0.1:9092",
                                                       "security_protocol": "PLAINTEXT", "sasl_mechanism": "",
                                                       "sasl_username": "", "webhook_url": ""}, "via": "cli"}),
        ("cluster.changed", None, {"before": {"bootstrap_servers": "127.0.0.1:9092"},
                                   "after": {"bootstrap_servers": "10.0.0.1:9092"}, "via": "cli"}),
    ], "the repeated registration changed nothing and wrote nothing"


@pytest.mark.django_db
def test_role_mappings_are_written_and_deleted_in_bulk_through_the_audited_service(admin_client):
    from groups.models import RoleMapping

    form = {"directory_group": HOSTILE, "role": "viewer", "clusters": "", "group_pattern": "*", "topic_pattern": "*"}
    assert admin_client.post("/admin/groups/rolemapping/add/", form).status_code == 302
    mapping = RoleMapping.objects.get()
    assert AuditEvent.objects.get(action="role_mapping.created").detail["directory_group"] == HOSTILE
    deleted = admin_client.post("/admin/groups/rolemapping/", {"action": "delete_selected", "post": "yes",
                                                                "_selected_action": [mapping.id]})
    assert deleted.status_code == 302 and not RoleMapping.objects.exists()
    assert AuditEvent.objects.get(action="role_mapping.deleted").object_id == str(mapping.id)
