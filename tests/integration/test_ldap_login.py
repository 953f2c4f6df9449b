"""Login through a real LDAP directory (slapd, tests/harness/slapd.py) on
the login form, by the Django test client and in Chromium: roles from the
directory's groups re-applied at every login, wrong passwords counted toward
the lockout, no local account taken over, StartTLS and ldaps with the
directory's CA (and a refusal in words without it), and local login when the
directory is down (issue 23, items 2 and 3)."""

from __future__ import annotations

import errno
import logging
import time
import uuid

import ldap
import pytest
from django_auth_ldap.backend import ldap_error
from django.contrib.auth import get_user_model
from django.test import Client

from groups.models import AuditEvent, DirectoryIdentity, RoleMapping
from groups.roles import ensure_roles
from tests.harness.processes import free_ports
from tests.harness.slapd import BIND_DN, GROUPS, PEOPLE, POSIX_GROUPS, Slapd
from tests.pki import CertificateAuthority

PASSWORD = "correct horse battery staple"
# The errno OpenLDAP's client gives a connection refused at once (ENOTCONN on
# this machine's libldap for a closed loopback port; ECONNREFUSED accepted too).
REFUSED = (errno.ENOTCONN, errno.ECONNREFUSED)


@pytest.fixture(scope="module")
def slapd():
    server = Slapd()
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def directory(slapd, settings, db):
    """Gapwatch configured for the test directory (StartTLS with its CA), its
    groups gapwatch-approvers and gapwatch-viewers mapped to the roles."""
    settings.LDAP_SERVER_URI = slapd.uri
    settings.LDAP_BIND_DN, settings.LDAP_BIND_PASSWORD = BIND_DN, slapd.bind_password
    settings.LDAP_USER_SEARCH_BASE, settings.LDAP_USER_FILTER = PEOPLE, "(uid=%(user)s)"
    settings.LDAP_GROUP_SEARCH_BASE, settings.LDAP_GROUP_TYPE, settings.LDAP_GROUP_FILTER = GROUPS, "groupOfNames", ""
    settings.LDAP_START_TLS, settings.LDAP_CA_FILE = True, str(slapd.ca_file)
    ensure_roles()
    RoleMapping.objects.create(directory_group="gapwatch-approvers", role="approver")
    RoleMapping.objects.create(directory_group="gapwatch-viewers", role="viewer")
    return slapd


def person(slapd, *groups: str) -> tuple[str, str]:
    """A new person of the directory in ``groups``: (uid, DN)."""
    uid = f"p-{uuid.uuid4().hex[:8]}"
    return uid, slapd.add_person(uid, PASSWORD, groups=groups)


def log_in(client: Client, username: str, password: str = PASSWORD):
    client.get("/accounts/login/")
    return client.post("/accounts/login/", {"username": username, "password": password, "next": "/"})


def roles_of(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_it_logs_a_directory_person_in_with_the_role_their_group_maps_to(directory, client):
    uid, dn = person(directory, "gapwatch-approvers", "unmapped-team")
    client.get("/accounts/login/")
    began = time.monotonic()
    response = client.post("/accounts/login/", {"username": uid, "password": PASSWORD, "next": "/"})
    print(f"LDAP login, the form's POST (StartTLS, search, bind, group search, roles): "
          f"{time.monotonic() - began:.3f} s")
    assert response.status_code == 302 and response["Location"] == "/"
    user = get_user_model().objects.get(directory_identity__subject=dn)
    assert int(client.session["_auth_user_id"]) == user.id
    assert client.session["_auth_user_backend"] == "groups.web.ldap_login.DirectoryBackend"
    assert user.username == uid and not user.has_usable_password()
    assert (user.email, user.first_name, user.last_name) == (f"{uid}@example.test", uid.title(), "Tester")
    identity = user.directory_identity
    assert (identity.source, identity.issuer) == ("ldap", directory.uri)
    assert identity.groups == ["gapwatch-approvers", "unmapped-team"]
    assert roles_of(user) == {"approver"}
    audit = AuditEvent.objects.get(action="identity.roles_changed", object_id=str(user.id))
    assert (audit.detail["source"], audit.detail["subject"], audit.detail["issuer"], audit.detail["username"]) == (
        "ldap", dn, directory.uri, uid)
    assert (audit.detail["before"], audit.detail["after"]) == ([], ["approver"])
    assert client.get("/").status_code == 200


def test_a_person_removed_from_the_directory_group_loses_the_role_at_the_next_login(directory):
    uid, dn = person(directory, "gapwatch-approvers")
    assert log_in(Client(), uid).status_code == 302
    user = get_user_model().objects.get(directory_identity__subject=dn)
    assert roles_of(user) == {"approver"}
    directory.set_membership(dn, "gapwatch-approvers", member=False)
    directory.set_membership(dn, "gapwatch-viewers", member=True)
    assert log_in(Client(), uid).status_code == 302
    assert roles_of(user) == {"viewer"}
    directory.set_membership(dn, "gapwatch-viewers", member=False)
    client = Client()
    assert log_in(client, uid).status_code == 302
    assert not user.groups.exists()
    assert "no access" in client.get("/", follow=True).content.decode()
    assert get_user_model().objects.filter(directory_identity__subject=dn).count() == 1
    assert [e.detail["after"] for e in AuditEvent.objects.filter(
        action="identity.roles_changed", object_id=str(user.id)).order_by("id")] == [["approver"], ["viewer"], []]


def test_a_wrong_password_fails_and_counts_toward_the_lockout(directory, client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    uid, _ = person(directory, "gapwatch-viewers")
    for _ in range(2):
        response = log_in(client, uid, "wrong password")
        assert response.status_code == 200 and "_auth_user_id" not in client.session
        page = response.content.decode()
        assert "Please enter a correct username and password" in page and "through the directory failed" not in page
    assert log_in(client, uid, "wrong password").status_code == 429  # the third failure locks
    response = log_in(client, uid)
    assert response.status_code == 429, "the right password must not work while locked out"
    assert "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username=uid).exists()


def test_a_local_account_of_the_same_name_is_not_taken_over(directory):
    uid, dn = person(directory, "gapwatch-approvers")
    local = get_user_model().objects.create_user(uid, password="local secret")
    assert log_in(Client(), uid).status_code == 302
    user = get_user_model().objects.get(directory_identity__subject=dn)
    assert user.id != local.id and user.username.startswith(f"{uid}-")
    assert not DirectoryIdentity.objects.filter(user=local).exists() and not local.groups.exists()
    # The local password still opens the local account, and only it.
    client = Client()
    assert log_in(client, uid, "local secret").status_code == 302
    assert int(client.session["_auth_user_id"]) == local.id


def test_a_directory_login_never_stores_the_password(directory, settings):
    uid, dn = person(directory, "gapwatch-viewers")
    assert log_in(Client(), uid).status_code == 302
    user = get_user_model().objects.get(directory_identity__subject=dn)
    assert not user.has_usable_password() and not user.check_password(PASSWORD)
    # With the directory off, the account has no Gapwatch password to log in with.
    settings.LDAP_SERVER_URI = ""
    assert log_in(Client(), user.username).status_code == 200


def test_ldaps_with_the_directorys_ca_works(directory, settings):
    settings.LDAP_SERVER_URI, settings.LDAP_START_TLS = directory.ldaps_uri, False
    uid, dn = person(directory, "gapwatch-viewers")
    assert log_in(Client(), uid).status_code == 302
    assert get_user_model().objects.get(directory_identity__subject=dn).directory_identity.issuer == (
        directory.ldaps_uri)


@pytest.mark.parametrize("scheme", ["starttls", "ldaps"])
def test_a_certificate_from_an_unknown_ca_is_refused_in_words(directory, settings, tmp_path, scheme, caplog):
    if scheme == "ldaps":
        settings.LDAP_SERVER_URI, settings.LDAP_START_TLS = directory.ldaps_uri, False
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(CertificateAuthority("Some other CA").certificate_pem)
    settings.LDAP_CA_FILE = str(other_ca)
    uid, _ = person(directory, "gapwatch-approvers")
    client = Client()
    with caplog.at_level(logging.WARNING):
        response = log_in(client, uid)
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    page = response.content.decode()
    assert "the directory&#x27;s TLS certificate is not trusted" in page, page
    assert "Local accounts can still log in." in page
    assert "TLS certificate is not trusted" in caplog.text
    assert not get_user_model().objects.filter(username=uid).exists()


def test_with_the_directory_down_local_login_still_works_and_the_page_says_so(directory, settings):
    (settings.LDAP_SERVER_URI,) = [f"ldap://127.0.0.1:{port}" for port in free_ports(1)]  # nothing listens
    settings.LDAP_TIMEOUT = 30
    get_user_model().objects.create_user("breakglass", password="local secret")
    uid, _ = person(directory, "gapwatch-approvers")
    client = Client()
    response = log_in(client, uid)
    assert response.status_code == 200 and "the directory cannot be reached" in response.content.decode()
    asked: list[ldap.LDAPError] = []

    def directory_error(sender, context, user, request, exception, **kwargs):
        asked.append(exception)

    ldap_error.connect(directory_error)
    try:
        assert log_in(client, "breakglass", "local secret").status_code == 302
    finally:
        ldap_error.disconnect(directory_error)
    # The directory was asked once and its refusal came back from connect() itself (an errno), so
    # the local login never waited out LDAP_TIMEOUT (30 s). How long it takes: bench/timeouts_bench.py.
    (error,) = asked
    assert isinstance(error, ldap.SERVER_DOWN) and error.args[0].get("errno") in REFUSED, error.args


def test_a_refused_service_account_is_said_without_its_password(directory, settings, caplog):
    settings.LDAP_BIND_PASSWORD = "not-the-service-password-" + uuid.uuid4().hex
    uid, _ = person(directory, "gapwatch-approvers")
    with caplog.at_level(logging.DEBUG):
        response = log_in(Client(), uid)
    page = response.content.decode()
    assert response.status_code == 200 and "refused Gapwatch&#x27;s service account" in page
    assert settings.LDAP_BIND_PASSWORD not in page and settings.LDAP_BIND_PASSWORD not in caplog.text


def test_posix_groups(directory, settings):
    settings.LDAP_GROUP_TYPE, settings.LDAP_GROUP_SEARCH_BASE = "posix", POSIX_GROUPS
    uid, dn = person(directory, "gapwatch-viewers")
    assert log_in(Client(), uid).status_code == 302
    assert roles_of(get_user_model().objects.get(directory_identity__subject=dn)) == {"viewer"}


def test_active_directory_groups_are_followed_through_nesting(directory, settings):
    """Active Directory's group type finds groups by their ``member`` DNs and
    follows groups inside groups; slapd's groupOfNames have the same shape."""
    settings.LDAP_GROUP_TYPE, settings.LDAP_GROUP_FILTER = "activedirectory", "(objectClass=groupOfNames)"
    team = f"team-{uuid.uuid4().hex[:6]}"
    uid, dn = person(directory, team)
    directory.set_membership(f"cn={team},{GROUPS}", "gapwatch-approvers", member=True)
    assert log_in(Client(), uid).status_code == 302
    user = get_user_model().objects.get(directory_identity__subject=dn)
    assert roles_of(user) == {"approver"} and team in user.directory_identity.groups
    directory.set_membership(f"cn={team},{GROUPS}", "gapwatch-approvers", member=False)


def test_without_a_server_uri_ldap_is_off(directory, settings):
    settings.LDAP_SERVER_URI = ""
    uid, _ = person(directory, "gapwatch-approvers")
    response = log_in(Client(), uid)
    assert response.status_code == 200 and "directory" not in response.content.decode().lower()
    assert not get_user_model().objects.filter(username=uid).exists()


def test_with_local_logins_off_the_form_stays_for_the_directory(directory, settings):
    settings.LOCAL_LOGIN = False
    get_user_model().objects.create_user("breakglass", password="local secret")
    client = Client()
    assert 'name="password"' in client.get("/accounts/login/").content.decode()
    assert log_in(client, "breakglass", "local secret").status_code == 200
    uid, _ = person(directory, "gapwatch-viewers")
    assert log_in(client, uid).status_code == 302


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_directory_person_logs_in_through_the_login_page_in_chromium(directory, live_server, page):
    uid, dn = person(directory, "gapwatch-approvers")
    began = time.monotonic()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", uid)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.wait_for_selector("h1")
    print(f"LDAP login through the login page in Chromium: {time.monotonic() - began:.2f} s")
    assert page.locator("h1").inner_text() == "New partitions"
    assert page.locator("header .muted").inner_text() == uid
    assert roles_of(get_user_model().objects.get(directory_identity__subject=dn)) == {"approver"}
