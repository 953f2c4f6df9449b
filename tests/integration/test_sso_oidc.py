"""Single sign-on through a real OpenID provider (Keycloak, the session's;
tests/integration/conftest.py) in a real Chromium: the authorization-code
flow with PKCE (the client requires S256), roles from the groups claim
re-applied at every login, logout ending the provider's session, and local
logins that can be switched off (issue 23, items 1 and 3)."""

from __future__ import annotations

import time
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from groups.models import AuditEvent, DirectoryIdentity, RoleMapping
from groups.roles import ensure_roles
from groups.web import sso

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"


@pytest.fixture
def provider(keycloak, live_server, settings):
    """Gapwatch configured for the session's Keycloak through a client of its
    own (its redirect URI is this live server's)."""
    client_id = f"gapwatch-web-{uuid.uuid4().hex[:8]}"
    secret = keycloak.add_login_client(client_id, base_url=live_server.url)
    settings.OIDC_ISSUER = keycloak.issuer
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = client_id, secret
    settings.OIDC_PROVIDER_NAME = "Keycloak"
    ensure_roles()
    RoleMapping.objects.create(directory_group="gapwatch-approvers", role="approver")
    RoleMapping.objects.create(directory_group="gapwatch-viewers", role="viewer")
    return keycloak


def person(keycloak, *groups: str) -> tuple[str, str]:
    """A new person of the realm in ``groups``: (username, subject)."""
    username = f"p-{uuid.uuid4().hex[:8]}"
    return username, keycloak.add_user(username, PASSWORD, groups=groups)


def log_in_at_the_provider(page, base_url: str, username: str) -> float:
    """From Gapwatch's login page through the provider's; returns the seconds it took."""
    began = time.monotonic()
    page.goto(f"{base_url}/accounts/login/")
    page.click("text=Log in with Keycloak")
    page.wait_for_selector("#username")
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("#kc-login")
    page.wait_for_url(f"{base_url}/**")
    page.wait_for_selector("h1")
    return time.monotonic() - began


def test_a_person_logs_in_through_the_provider_with_the_role_their_group_maps_to(provider, live_server, page):
    username, subject = person(provider, "gapwatch-approvers", "unmapped-team")
    took = log_in_at_the_provider(page, live_server.url, username)
    print(f"OpenID login through Keycloak's page: {took:.2f} s")
    assert page.locator("h1").inner_text() == "New partitions"
    assert page.locator("header .muted").inner_text() == username
    user = get_user_model().objects.get(directory_identity__subject=subject)
    assert user.username == username and not user.has_usable_password()
    identity = user.directory_identity
    assert (identity.source, identity.issuer) == ("oidc", provider.issuer)
    assert identity.groups == ["gapwatch-approvers", "unmapped-team"]
    assert set(user.groups.values_list("name", flat=True)) == {"approver"}
    audit = AuditEvent.objects.get(action="identity.roles_changed", object_id=str(user.id))
    assert (audit.detail["subject"], audit.detail["issuer"], audit.detail["username"]) == (
        subject, provider.issuer, username)
    assert (audit.detail["before"], audit.detail["after"]) == ([], ["approver"])

    # Logging out ends the provider's session too: the next login asks for the password again.
    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{live_server.url}/accounts/login/**")
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url
    page.click("text=Log in with Keycloak")
    page.wait_for_selector("#username")


def test_a_person_removed_from_the_directory_group_loses_the_role_at_the_next_login(provider, live_server, page):
    username, subject = person(provider, "gapwatch-approvers")
    log_in_at_the_provider(page, live_server.url, username)
    user = get_user_model().objects.get(directory_identity__subject=subject)
    assert set(user.groups.values_list("name", flat=True)) == {"approver"}
    provider.set_membership(subject, "gapwatch-approvers", member=False)
    provider.set_membership(subject, "gapwatch-viewers", member=True)
    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{live_server.url}/accounts/login/**")
    log_in_at_the_provider(page, live_server.url, username)
    assert set(user.groups.values_list("name", flat=True)) == {"viewer"}
    provider.set_membership(subject, "gapwatch-viewers", member=False)
    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{live_server.url}/accounts/login/**")
    log_in_at_the_provider(page, live_server.url, username)
    assert "no access" in page.content()
    assert not user.groups.exists()
    assert [e.detail["after"] for e in AuditEvent.objects.filter(
        action="identity.roles_changed", object_id=str(user.id)).order_by("id")] == [["approver"], ["viewer"], []]


def test_a_local_account_of_the_same_name_is_not_taken_over(provider, live_server, page):
    username, subject = person(provider, "gapwatch-viewers")
    local = get_user_model().objects.create_user(username, password="local secret")
    log_in_at_the_provider(page, live_server.url, username)
    user = get_user_model().objects.get(directory_identity__subject=subject)
    assert user.id != local.id and user.username.startswith(f"{username}-")
    assert not DirectoryIdentity.objects.filter(user=local).exists()


def test_local_logins_can_be_switched_off(provider, live_server, page, settings):
    ensure_roles()
    get_user_model().objects.create_user("breakglass", password="local secret")
    settings.LOCAL_LOGIN = False
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.locator("input[name=password]").count() == 0
    assert page.locator("text=Log in with Keycloak").is_visible()
    client = Client()
    refused = client.post("/accounts/login/", {"username": "breakglass", "password": "local secret"})
    assert refused.status_code == 200 and "_auth_user_id" not in client.session
    settings.LOCAL_LOGIN = True
    client = Client()
    assert client.post("/accounts/login/", {"username": "breakglass", "password": "local secret"}).status_code == 302


def test_an_unreachable_provider_is_a_message_on_the_login_page_and_local_login_still_works(settings, db):
    settings.OIDC_ISSUER = "http://127.0.0.1:9/realms/nowhere"  # the discard port: nothing answers
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "gapwatch", "secret"
    sso._discovery.clear()
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302 and response["Location"].endswith("/accounts/login/?sso=unreachable")
    assert "cannot be reached" in client.get(response["Location"]).content.decode()
    get_user_model().objects.create_user("local", password="local secret")
    assert client.post("/accounts/login/", {"username": "local", "password": "local secret"}).status_code == 302


def test_without_an_issuer_single_sign_on_is_off(settings, db):
    settings.OIDC_ISSUER = ""
    client = Client()
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Log in with" not in client.get("/accounts/login/").content.decode()


def test_a_team_approver_approves_inside_the_scope_and_is_refused_outside(provider, live_server, page):
    """Logged in through the provider's page as a member of payments-oncall:
    the console shows the team's finding with its buttons and approves it; a
    finding of another team is not shown to exist, and the API refuses to act on
    one the team may only read."""
    from groups.models import Finding, RemediationJob
    from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic

    RoleMapping.objects.create(directory_group="payments-oncall", role="approver", clusters="prod-eu",
                               group_pattern="payments-*", topic_pattern="*")
    RoleMapping.objects.create(directory_group="payments-oncall", role="viewer", clusters="prod-eu",
                               group_pattern="orders-*", topic_pattern="*")
    cluster = make_cluster("prod-eu")
    findings = {}
    for group_id, topic in (("payments-api", "payments"), ("orders-api", "orders"), ("billing", "ledger")):
        findings[group_id] = make_finding(make_group(cluster, group_id, member_count=0, state="Empty"),
                                          make_generation(make_topic(cluster, topic)))
    username, _ = person(provider, "payments-oncall")
    log_in_at_the_provider(page, live_server.url, username)
    page.goto(f"{live_server.url}/?view=partitions")
    rows = page.locator("tr[data-finding]")
    assert sorted(int(rows.nth(i).get_attribute("data-finding")) for i in range(rows.count())) == sorted(
        [findings["payments-api"].id, findings["orders-api"].id])
    assert page.locator(f'tr[data-finding="{findings["orders-api"].id}"] td.row-actions a').count() == 0
    page.click(f'tr[data-finding="{findings["payments-api"].id}"] td.row-actions >> text=Reset')
    page.click("button:text('Approve reset')")
    page.wait_for_url(f"{live_server.url}/jobs/**")
    job = RemediationJob.objects.get()
    assert list(job.findings.values_list("id", flat=True)) == [findings["payments-api"].id]
    assert page.goto(f"{live_server.url}/findings/{findings['billing'].id}/").status == 404
    # The page's own session, through the API: acting on the read-only finding is a 403 in JSON.
    answer = page.request.post(f"{live_server.url}/api/v1/findings/{findings['orders-api'].id}/dismiss",
                               data={"reason": "not ours"},
                               headers={"X-CSRFToken": next(c["value"] for c in page.context.cookies()
                                                            if c["name"] == "csrftoken"),
                                        "Referer": live_server.url})
    assert answer.status == 403 and "outside your scope" in answer.json()["error"]
    assert Finding.objects.get(id=findings["orders-api"].id).closed_at is None


def test_a_forged_or_replayed_callback_is_refused_with_a_message_and_logs_nobody_in(settings, db):
    """No provider is asked: a callback whose state this browser never got (no
    login started, or another login's state) lands on the login page with
    "refused", never a 400 page or a session."""
    settings.OIDC_ISSUER = "http://127.0.0.1:9/realms/nowhere"
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "gapwatch", "secret"
    client = Client()
    for query in ({"code": "stolen", "state": "forged"}, {"error": "access_denied", "state": "forged"}, {}):
        response = client.get("/oidc/callback/", query)
        assert response.status_code == 302 and response["Location"].endswith("/accounts/login/?sso=failed"), query
    session = client.session
    session["oidc_states"] = {"the-real-one": {"nonce": "n", "code_verifier": "v"}}
    session.save()
    response = client.get("/oidc/callback/", {"code": "stolen", "state": "forged"})
    assert response.status_code == 302 and response["Location"].endswith("/accounts/login/?sso=failed")
    assert "refused" in client.get(response["Location"]).content.decode()
    assert "_auth_user_id" not in client.session
