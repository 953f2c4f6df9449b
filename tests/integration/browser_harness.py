"""Headless Chromium for the browser tests: one binary, one set of flags, one
browser per test session (``chromium`` in conftest; each test gets a fresh
context and page), one place for screenshots, and one way to log in."""

from __future__ import annotations

import shutil

from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
# Screenshots a person can look at after a run.
ARTIFACTS = ROOT / ".gapwatch" / "test-artifacts"


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def log_in(page, live_server, username: str, password: str) -> None:
    """Through the login page, landing on the home page."""
    page.goto(f"{live_server.url}/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


OPERATOR_PASSWORD = "correct horse battery"


def approver_operator(username: str = "operator"):
    """A person in the approver role, to log in as with ``OPERATOR_PASSWORD``."""
    from django.contrib.auth.models import Group, User

    from groups.roles import ensure_roles

    ensure_roles()
    user = User.objects.create_user(username, password=OPERATOR_PASSWORD)
    user.groups.add(Group.objects.get(name="approver"))
    return user
