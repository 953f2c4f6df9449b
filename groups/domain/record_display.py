"""What the record viewer shows of a missed range: which offsets to read and
how a record's bytes are shown. Pure: no Kafka, no Django.

Offsets are "next to read" and ranges half-open, as everywhere: the first
``count`` records of ``[start, end)`` are ``[start, start + count)``.
"""

from __future__ import annotations

from typing import Literal

# At most this many records from each end of a range, and this many bytes of a
# key, a value or a header shown (a record can be megabytes).
MAX_RECORDS_PER_END = 50
SHOWN_BYTES = 1024

Encoding = Literal["text", "hex", "null"]


def record_slices(*, start: int, end: int, count: int) -> list[tuple[int, int]]:
    """The offset ranges holding the first and the last ``count`` offsets of
    ``[start, end)``: one range when they meet or overlap, none when empty."""
    if end <= start or count <= 0:
        return []
    head_end = min(end, start + count)
    tail_start = max(start, end - count)
    if tail_start <= head_end:
        return [(start, end)]
    return [(start, head_end), (tail_start, end)]


def _printable(text: str) -> bool:
    return all(ch.isprintable() or ch in "\n\t\r" for ch in text)


def shown_bytes(data: bytes | None, *, cap: int = SHOWN_BYTES) -> dict:
    """A key, value or header as a person can read it: ``encoding`` "text"
    (UTF-8 of printable characters), "hex" (anything else) or "null" (no
    bytes at all, not even empty); ``shown`` at most ``cap`` bytes of it;
    ``size`` and ``cut`` (bytes not shown). The text is plain data: pages
    escape it like any other."""
    if data is None:
        return {"encoding": "null", "shown": "", "size": 0, "cut": 0}
    head = data[:cap]
    try:
        text: str | None = head.decode("utf-8")
    except UnicodeDecodeError as error:
        # A character cut by the cap is not binary: show the whole ones before it.
        cut_character = len(data) > cap and error.start >= len(head) - 3 and error.reason == "unexpected end of data"
        text = head[:error.start].decode("utf-8") if cut_character else None
    if text is not None and _printable(text):
        return {"encoding": "text", "shown": text, "size": len(data), "cut": len(data) - len(text.encode())}
    return {"encoding": "hex", "shown": head.hex(" "), "size": len(data), "cut": len(data) - len(head)}
