"""Every table that may scroll sideways (``div.table-scroll``, on a phone a
wide table does) can be scrolled from the keyboard: axe's
scrollable-region-focusable. The browser test sees it only on a page whose
table overflows, which depends on its data (a CI run's topic page did, with
a longer topic name), so every template's wrapper is judged here."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_every_scrolling_table_is_a_named_region_the_keyboard_reaches():
    wrappers = [(path.relative_to(TEMPLATES), tag) for path in sorted(TEMPLATES.rglob("*.html"))
                for tag in re.findall(r"<div[^>]*\btable-scroll\b[^>]*>", path.read_text())]
    assert len(wrappers) >= 12, wrappers
    unreachable = [(path, tag) for path, tag in wrappers
                   if not ('tabindex="0"' in tag and 'role="region"' in tag and re.search(r'aria-label="[^"]+"', tag))]
    assert unreachable == []
