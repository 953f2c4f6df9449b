"""Headless Chromium for the browser tests: one binary, one set of flags, one
browser per test session (``chromium`` in conftest; each test gets a fresh
context and page), one place for screenshots, and one way to log in."""

from __future__ import annotations

import os
import shutil

from tests.conftest import ROOT

# Chromium's headless shell (Debian's chromium-headless-shell, which set-up installs): the browser without
# its desktop parts, the build Playwright itself runs headless. GAPWATCH_CHROMIUM names another binary.
CHROMIUM = (os.environ.get("GAPWATCH_CHROMIUM") or shutil.which("chromium-headless-shell")
            or shutil.which("chromium") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
# Screenshots a person can look at after a run.
ARTIFACTS = ROOT / ".gapwatch" / "test-artifacts"
# The two windows every page is judged at (issue 44): a laptop and a phone.
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


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


def show_expansion_plan(page, live_server, topic_id: int, partitions: int) -> None:
    """On the topic's page, the plan of raising it to ``partitions`` (as the logged-in person)."""
    page.goto(f"{live_server.url}/topics/{topic_id}/")
    page.fill("input[name=partitions]", str(partitions))
    page.click("text=Show the plan")
    page.wait_for_load_state("load")


def approve_expansion_as(page, live_server, username: str, job_id: int) -> str:
    """Log out, log in as ``username`` (password ``OPERATOR_PASSWORD``) and approve the expansion on
    its page; the page's messages after it."""
    page.context.clear_cookies()
    log_in(page, live_server, username, OPERATOR_PASSWORD)
    page.goto(f"{live_server.url}/expansions/{job_id}/")
    page.click("#approve-expansion")
    page.wait_for_load_state("load")
    return page.locator("ul.messages").inner_text()


def approver_operator(username: str = "operator"):
    """A person in the approver role, to log in as with ``OPERATOR_PASSWORD``."""
    from django.contrib.auth.models import Group, User

    from groups.roles import ensure_roles

    ensure_roles()
    user = User.objects.create_user(username, password=OPERATOR_PASSWORD)
    user.groups.add(Group.objects.get(name="approver"))
    return user


# axe-core, installed by scripts/setup.sh from npm (third_party/npm/package.json); nothing is fetched at run time.
AXE_SCRIPT = ROOT / ".gapwatch" / "npm" / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page, *, impacts=("serious", "critical")) -> list[str]:
    """Run axe-core on the page as it is and return its violations of these
    impacts, one line per offending element (rule, impact, the element). The
    script is evaluated through the DevTools protocol, which the page's CSP
    does not govern, so the page itself stays under its real policy."""
    page.evaluate(AXE_SCRIPT.read_text())
    results = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{page.url}: {v['id']} ({v['impact']}): {v['help']} — {node['html'][:200]}"
        for v in results["violations"] if v["impact"] in impacts for node in v["nodes"]
    ]
