"""The URL converter of a name from a cluster (a group id, a topic name) as
one path segment.

Group ids are any text. A WSGI server hands Django the path already
percent-decoded, so "%2F" would arrive as "/"; and a browser resolves a
segment "." or ".." (even as "%2E%2E") before it asks. So a name's "/" and
"~", and the dots of a name that is only dots, travel as "~2F", "~7E" and
"~2E", and the empty name (Kafka's old default group id) as a lone "~";
Django's ``reverse`` percent-encodes everything else. A path no name could
give (a NUL byte, a "~" without one of those codes) matches nothing: a 404,
never a query.
"""

from __future__ import annotations

import re

ESCAPES = {"~": "~7E", "/": "~2F"}
_ESCAPED = re.compile(r"~(.{0,2})")
_UNESCAPE = {"7E": "~", "2F": "/", "2E": "."}


class NameConverter:
    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        if "\x00" in value:
            raise ValueError("a NUL byte is in no name")
        if value == "~":
            return ""

        def unescape(match: re.Match) -> str:
            code = match.group(1).upper()
            if code not in _UNESCAPE:
                raise ValueError(f"~{match.group(1)} is not an escape of a name")
            return _UNESCAPE[code]

        return _ESCAPED.sub(unescape, value)

    def to_url(self, value: str) -> str:
        if not value:
            return "~"
        escaped = "".join(ESCAPES.get(character, character) for character in value)
        if escaped in (".", ".."):
            escaped = escaped.replace(".", "~2E")
        return escaped
