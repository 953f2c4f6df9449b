"""How a long name wraps on the pages (groups.templatetags.gapwatch.breakable),
table-driven: each case says why its markup is right."""

from __future__ import annotations

import pytest

from groups.templatetags.gapwatch import breakable


@pytest.mark.parametrize(("name", "expected", "why"), [
    ("orders", "orders", "no separator: one word, never broken"),
    ("payments.settlement-consumer_eu-west-1-blue",
     "payments.<wbr>settlement-<wbr>consumer_<wbr>eu-<wbr>west-<wbr>1-<wbr>blue",
     "a wrap is allowed after each '.', '-' and '_', the separator staying on the line it ends"),
    ("connect-sink:v2/a", "connect-<wbr>sink:v2/a", "':' and '/' are left to the browser's own line breaking"),
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;", "escaped: the id is text"),
    ("<b>a.b</b>", "&lt;b&gt;a.<wbr>b&lt;/b&gt;", "escaped first: the only markup added is <wbr>"),
    ("a&b'c\"d", "a&amp;b&#x27;c&quot;d", "an escaped entity holds no separator, so none is split"),
    (42, "42", "a number is written as it is"),
])
def test_breakable(name, expected, why):
    assert breakable(name) == expected, why
