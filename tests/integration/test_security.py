"""Attacks that got past the first round of issue 13's fixes: a NUL byte
smuggled in through a cookie, a webhook receiver that redirects or a name that
resolves elsewhere at send time, and a readable lockout page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from groups.models import Cluster, Notification
from tasks.notifications import send_notification
from tests.factories import user_with_role
from tests.harness.webhooks import WebhookReceiver


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["sessionid", "csrftoken"])
def test_a_cookie_holding_a_nul_byte_is_ignored_not_a_500(client, name):
    # The test client quotes the value as "abc\000defghijkl"; Django's cookie parser decodes it back to a NUL.
    client.cookies[name] = "abc\x00defghijkl"
    response = client.get("/")
    assert response.status_code == 302  # anonymous: to the login page
    assert "/accounts/login/" in response["Location"]


@pytest.mark.django_db
def test_a_logged_in_user_with_a_nul_cookie_beside_the_session_keeps_working(client):
    client.force_login(user_with_role("reader", "viewer"))
    client.cookies["other"] = "x\x00y"
    assert client.get("/").status_code == 200


@pytest.mark.django_db
def test_a_webhook_redirect_is_not_followed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # both servers listen on loopback
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    inside, outside = WebhookReceiver(), None
    try:
        outside = WebhookReceiver(redirect_to=inside.url)
        cluster = Cluster.objects.create(name="local", bootstrap_servers="127.0.0.1:9092")
        notification = Notification.objects.create(cluster=cluster, event="finding.created", url=outside.url,
                                                   payload={"x": 1})
        send_notification.apply(args=(notification.id,))
        notification.refresh_from_db()
        assert outside.hits == ["POST"]
        assert inside.hits == [], "the redirect target must never be called"
        assert notification.status == Notification.Status.FAILED
        assert "not followed" in notification.last_error
    finally:
        inside.close()
        if outside:
            outside.close()


def test_the_connected_address_is_checked_not_only_the_resolved_one():
    from tasks.notifications import _public_peer_connection

    # A name checked as public may resolve to loopback when the connection is made (DNS rebinding).
    receiver = WebhookReceiver()
    try:
        with pytest.raises(OSError, match="public addresses only"):
            _public_peer_connection(("127.0.0.1", receiver.server.server_port), timeout=5)
        assert receiver.hits == []
    finally:
        receiver.close()


@pytest.mark.django_db
def test_the_lockout_page_says_why_and_for_how_long(client, settings):
    settings.AXES_FAILURE_LIMIT = 2
    get_user_model().objects.create_user("operator", password="right-password-1")
    for password in ("wrong", "wrong", "right-password-1"):
        response = client.post("/accounts/login/", {"username": "operator", "password": password})
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content and b"0:15:00" in response.content
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_a_staff_account_in_no_role_gets_no_access_in_the_admin_either(client, settings):
    from django.contrib.auth.models import Permission

    staff = user_with_role("clerk", None)
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="groups",
                                                          codename__startswith="view_"))
    client.force_login(staff)
    for path in ("/admin/", "/admin/groups/finding/", "/admin/groups/cluster/"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert b"No access" in response.content
    assert client.post("/admin/logout/").status_code in (200, 302)


@pytest.mark.django_db
def test_forged_forwarding_headers_do_not_escape_a_lockout(client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    get_user_model().objects.create_user("operator", password="right-password-1")
    for attempt in range(3):
        client.post("/accounts/login/", {"username": "operator", "password": "wrong"},
                    HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}", HTTP_X_REAL_IP=f"203.0.113.{attempt}")
    response = client.post("/accounts/login/", {"username": "operator", "password": "right-password-1"},
                           HTTP_X_FORWARDED_FOR="192.0.2.77", HTTP_TRUE_CLIENT_IP="192.0.2.78")
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_an_oversized_body_is_a_json_400_for_the_api_and_a_readable_400_for_pages(client, settings):
    import json

    from groups.models import AuditEvent, Finding
    from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    cluster = make_cluster("prod")
    finding = make_finding(make_group(cluster, "billing"), make_generation(make_topic(cluster, "orders"), 2, (0, 1)), 1)
    client.force_login(user_with_role("approver", "approver"))
    response = client.post(f"/api/v1/findings/{finding.id}/dismiss", data=json.dumps({"reason": "x" * 4096}),
                           content_type="application/json")
    assert response.status_code == 400
    assert "too large" in response.json()["error"]
    response = client.post(f"/findings/{finding.id}/dismiss/confirm", {"reason": "x" * 4096})
    assert response.status_code == 400
    assert b"too large" in response.content and b"Bad request" in response.content
    assert Finding.objects.get(id=finding.id).closed_at is None
    assert not AuditEvent.objects.exists()
