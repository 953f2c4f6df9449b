"""Personal API tokens (issue 23, item 5): made and revoked by each user on
their own page, shown once, stored hashed, with an expiry and a read-only
flag; one ``Authorization: Bearer`` scheme for the API and /metrics (the
older ``Token`` keeps working on the API)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from groups.models import ApiToken, AuditEvent, Finding
from groups.services.tokens import TokenRefused, api_token_create
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role

pytestmark = pytest.mark.django_db


def bearer(key: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def made_on_the_page(client: Client, **fields) -> tuple[str, ApiToken]:
    """Makes a token through the user's page and reads the key from the answer."""
    response = client.post("/account/tokens/new", {"name": "ci", "days": 30, **fields})
    assert response.status_code == 200, response.content.decode()
    assert "no-store" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    key = re.search(r'id="new-token-value"[^>]*value="(gw_[^"]+)"', response.content.decode()).group(1)
    return key, ApiToken.objects.get(key_hash=hashlib.sha256(key.encode()).hexdigest())


def test_a_token_made_on_the_page_is_shown_once_stored_hashed_and_works_with_bearer(client, approver):
    client.force_login(approver)
    key, token = made_on_the_page(client, name="deploy script", days=10)
    assert (token.user, token.name, token.read_only, token.prefix) == (approver, "deploy script", False, key[:8])
    assert timedelta(days=10) - timedelta(minutes=1) < token.expires_at - timezone.now() <= timedelta(days=10)
    listing = client.get("/account/tokens/").content.decode()
    assert key not in listing and token.prefix in listing, "the key is shown once, then only its prefix"
    assert bearer(key).get("/api/v1/jobs").status_code == 200
    assert Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/v1/jobs").status_code == 200, "the old scheme"
    assert ApiToken.objects.get(id=token.id).last_used_at is not None
    audit = AuditEvent.objects.get(action="api_token.created")
    assert audit.detail == {"user": "approver", "name": "deploy script", "days": 10, "read_only": False}
    assert key not in json.dumps(audit.detail)


def test_the_same_token_reads_metrics(approver):
    _, key = api_token_create(user=approver, name="prometheus")
    response = bearer(key).get("/metrics", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 200 and b"gapwatch_" in response.content
    assert Client().get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/metrics"])
def test_expired_revoked_and_unknown_tokens_get_401_json(approver, path):
    _, expired = api_token_create(user=approver, name="old", days=1, now=timezone.now() - timedelta(days=2))
    revoked_token, revoked = api_token_create(user=approver, name="gone")
    ApiToken.objects.filter(id=revoked_token.id).update(revoked_at=timezone.now())
    for key, error in [(expired, "API token expired"), (revoked, "API token revoked"),
                       ("gw_" + "x" * 43, "invalid API token")]:
        response = bearer(key).get(path, REMOTE_ADDR="203.0.113.9")
        assert (response.status_code, response.json()) == (401, {"error": error}), path


def test_a_read_only_token_reads_and_may_not_write(client, approver):
    cluster = make_cluster()
    topic = make_topic(cluster)
    finding = make_finding(make_group(cluster), make_generation(topic))
    client.force_login(approver)
    key, token = made_on_the_page(client, read_only="on")
    assert token.read_only
    assert bearer(key).get(f"/api/v1/findings/{finding.id}").status_code == 200
    response = bearer(key).post(f"/api/v1/findings/{finding.id}/dismiss", {"reason": "noise"},
                                content_type="application/json")
    assert response.status_code == 403 and "read-only" in response.json()["error"]
    assert Finding.objects.get(id=finding.id).closed_at is None, "nothing changed"
    _, full = api_token_create(user=approver, name="full")
    response = bearer(full).post(f"/api/v1/findings/{finding.id}/dismiss", {"reason": "noise"},
                                 content_type="application/json")
    assert response.status_code == 200, "the same request with the user's rights"


def test_a_token_has_its_users_rights_only(viewer):
    cluster = make_cluster()
    finding = make_finding(make_group(cluster), make_generation(make_topic(cluster)))
    _, key = api_token_create(user=viewer, name="viewer script")
    response = bearer(key).post(f"/api/v1/findings/{finding.id}/dismiss", {"reason": "noise"},
                                content_type="application/json")
    assert response.status_code == 403


def test_revoking_on_the_page_stops_the_token_and_only_the_owner_may(client, approver):
    other = user_with_role("someone-else", "approver")
    _, others_key = api_token_create(user=other, name="theirs")
    others = ApiToken.objects.get(user=other)
    client.force_login(approver)
    key, token = made_on_the_page(client)
    assert client.post(f"/account/tokens/{others.id}/revoke").status_code == 404
    assert bearer(others_key).get("/api/v1/jobs").status_code == 200, "someone else's token untouched"
    response = client.post(f"/account/tokens/{token.id}/revoke", follow=True)
    assert "is revoked" in response.content.decode()
    assert bearer(key).get("/api/v1/jobs").status_code == 401
    assert client.post(f"/account/tokens/{token.id}/revoke").status_code == 302, "twice: still revoked, once audited"
    assert AuditEvent.objects.filter(action="api_token.revoked", object_id=str(token.id)).count() == 1
    assert client.get(f"/account/tokens/{token.id}/revoke").status_code == 405


@pytest.mark.parametrize("fields, error", [
    ({"days": 366}, "less than or equal to 365"),
    ({"days": 0}, "greater than or equal to 1"),
    ({"days": "ten"}, "Enter a whole number"),
    ({"name": ""}, "This field is required"),
    ({"name": "x" * 101}, "at most 100 characters"),
])
def test_bad_token_requests_are_form_errors_and_write_nothing(client, approver, fields, error):
    client.force_login(approver)
    response = client.post("/account/tokens/new", {"name": "ci", "days": 30, **fields})
    assert response.status_code == 400 and error in response.content.decode()
    assert not ApiToken.objects.exists()


def test_the_limits_are_settings(approver, settings):
    settings.API_TOKEN_MAX_DAYS, settings.API_TOKEN_DEFAULT_DAYS = 7, 3
    token, _ = api_token_create(user=approver, name="default")
    assert timedelta(days=3) - timedelta(minutes=1) < token.expires_at - timezone.now() <= timedelta(days=3)
    with pytest.raises(TokenRefused, match="1 to 7 days"):
        api_token_create(user=approver, name="long", days=8)


def test_the_command_makes_tokens_with_expiry_and_read_only(approver, capsys):
    call_command("create_api_token", "--user", "approver", "--days", "2", "--read-only")
    key = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(key_hash=hashlib.sha256(key.encode()).hexdigest())
    assert token.read_only and token.expires_at - timezone.now() <= timedelta(days=2)
    with pytest.raises(CommandError, match="1 to 365 days"):
        call_command("create_api_token", "--user", "approver", "--days", "9999")


def test_a_user_without_a_role_has_no_token_page(client):
    client.force_login(user_with_role("nobody", None))
    assert client.get("/account/tokens/").status_code == 403
    assert client.post("/account/tokens/new", {"name": "x", "days": 1}).status_code == 403
    assert not ApiToken.objects.exists()


def test_the_page_needs_a_login(client):
    response = client.get("/account/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
