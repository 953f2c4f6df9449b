"""The screenshots of README.md and docs/console.md, from a running `make up` stack (with its demo):
the home page, the finding page of the triage's first partition and its
missed records, the topic page of the first topic a latest group reads (its
partitions and configs on the broker) and that page's expansion plan (two
partitions more), taken by headless Chromium through Playwright as the
admin. Showing a plan changes nothing.

    source scripts/env.sh && $VENV/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.harness.browser import launch  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


def main() -> None:
    base = f"http://127.0.0.1:{os.environ.get('WEB_PORT', '8000')}"
    password = (Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch")) / "admin-password").read_text().strip()
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", os.environ.get("ADMIN_USERNAME", "admin"))
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        page.screenshot(path=str(OUT / "home.png"), full_page=True)
        # The finding page of the triage's first partition: the group with the worst loss comes first.
        page.locator("article.triage-group a.finding-link").first.click()
        page.wait_for_url("**/findings/*/")
        page.screenshot(path=str(OUT / "finding.png"), full_page=True)
        # Its missed records, read by a worker from the cluster.
        page.locator("a.records-link").click()
        page.fill("input[name=count]", "3")
        page.get_by_role("button", name="Read records").click()
        page.wait_for_selector("table.records")
        page.screenshot(path=str(OUT / "records.png"), full_page=True)
        plan_of_a_latest_groups_topic(page, base)
        # The topic as the broker has it now (read by a worker once the page shows), then the plan.
        page.wait_for_selector("#topic-broker:not([aria-busy])", timeout=30_000)
        page.screenshot(path=str(OUT / "topic.png"), full_page=True)
        page.locator("#expansion").scroll_into_view_if_needed()
        page.screenshot(path=str(OUT / "expansion-plan.png"), full_page=False)
        browser.close()


def plan_of_a_latest_groups_topic(page, base: str) -> None:
    """The topic page showing the plan of two partitions more, for the first topic (as listed) whose
    plan protects a group before or repairs it after: one a latest group reads, where the plan has
    something to do."""
    page.goto(f"{base}/topics/")
    rows = page.locator("table.browse-topics tbody tr")
    candidates = []
    for index in range(rows.count()):
        cells = rows.nth(index).locator("td")
        if "(internal)" in cells.nth(0).inner_text() or cells.nth(4).inner_text().strip() in ("0", ""):
            continue
        candidates.append((cells.nth(0).locator("a").get_attribute("href"), int(cells.nth(2).inner_text())))
    for href, partitions in candidates:
        page.goto(f"{base}{href}?partitions={partitions + 2}#expansion")
        if page.locator("table.expansion-plan tr[data-outcome=protected_before], "
                        "table.expansion-plan tr[data-outcome=repaired_after]").count():
            return
    raise SystemExit(f"no topic read by a latest group among {len(candidates)} read topics: is the demo running?")


if __name__ == "__main__":
    main()
