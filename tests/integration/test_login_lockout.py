"""Brute-force protection (django-axes) on both login pages: after the
configured number of wrong passwords for a user from one address, even the
right password is refused for the cool-off; other users are not affected."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def people(db, settings):
    settings.AXES_FAILURE_LIMIT = 5
    users = get_user_model().objects
    users.create_user("operator", password="right-password-1")
    users.create_user("colleague", password="right-password-2")
    users.create_superuser("root", password="right-password-3")


def log_in(client, path: str, username: str, password: str):
    client.get(path)
    return client.post(path, {"username": username, "password": password, "next": "/"})


@pytest.mark.parametrize(("path", "username", "password"), [
    ("/accounts/login/", "operator", "right-password-1"),
    ("/admin/login/", "root", "right-password-3"),
])
def test_wrong_passwords_lock_the_account_for_that_address(client, people, path, username, password):
    for _ in range(5):
        response = log_in(client, path, username, "wrong")
        assert "_auth_user_id" not in client.session
    response = log_in(client, path, username, password)
    assert response.status_code == 429, response.status_code
    assert "_auth_user_id" not in client.session, "the right password must not work while locked out"


def test_a_lockout_does_not_lock_other_users_and_success_before_it_resets_the_count(client, people):
    for _ in range(4):
        log_in(client, "/accounts/login/", "operator", "wrong")
    assert log_in(client, "/accounts/login/", "operator", "right-password-1").status_code == 302
    client.logout()
    for _ in range(4):  # the success reset the count: four more failures do not lock
        log_in(client, "/accounts/login/", "operator", "wrong")
    assert log_in(client, "/accounts/login/", "operator", "right-password-1").status_code == 302
    client.logout()
    for _ in range(5):
        log_in(client, "/accounts/login/", "operator", "wrong")
    assert log_in(client, "/accounts/login/", "colleague", "right-password-2").status_code == 302
