"""The record viewer's pure rules (groups.domain.record_display): which offsets of a
missed range are read, and how bytes are shown. Each case says why."""

from __future__ import annotations

import pytest

from groups.domain.record_display import record_slices, shown_bytes


@pytest.mark.parametrize(("start", "end", "count", "slices", "why"), [
    (0, 100, 5, [(0, 5), (95, 100)], "the first five and the last five, half-open"),
    (10, 18, 5, [(10, 18)], "the two ends overlap: read the range once"),
    (10, 20, 5, [(10, 20)], "the two ends meet: one range"),
    (10, 10, 5, [], "an empty range reads nothing"),
    (10, 12, 0, [], "no records asked for"),
    (0, 100, 1, [(0, 1), (99, 100)], "one record asked for: the first and the last"),
    (0, 3, 5, [(0, 3)], "fewer records than asked for at each end"),
])
def test_record_slices(start, end, count, slices, why):
    assert record_slices(start=start, end=end, count=count) == slices, why


@pytest.mark.parametrize(("data", "cap", "encoding", "shown", "cut", "why"), [
    (None, 64, "null", "", 0, "a null key is not an empty one"),
    (b"", 64, "text", "", 0, "an empty value is text with nothing in it"),
    (b'{"order": 42}\n', 64, "text", '{"order": 42}\n', 0, "printable UTF-8 is shown as text"),
    ("<script>é🦄</script>".encode(), 64, "text", "<script>é🦄</script>", 0,
     "hostile text stays text: the page escapes it"),
    (b"\x00\x01\xffA", 64, "hex", "00 01 ff 41", 0, "bytes that are not UTF-8 are shown as hex"),
    (b"a\x07b", 64, "hex", "61 07 62", 0, "a control character (a bell) is not readable text"),
    (b"x" * 10, 4, "text", "x" * 4, 6, "only the first bytes up to the cap are shown, and the rest counted"),
    (b"abc" + "é".encode() + b"zz", 4, "text", "abc", 4,
     "a character cut by the cap is left out whole, not shown as hex"),
    (b"\xff" * 10, 4, "hex", "ff ff ff ff", 6, "hex is capped too"),
    (b"a" + "🦄".encode() + b"z", 4, "text", "a", 5,
     "a four-byte character cut after three of its bytes is left out whole too: the longest a cut can be"),
    (b"abc\xc3", 4, "hex", "61 62 63 c3", 0,
     "all the bytes fit under the cap and the last character is broken: the data is not UTF-8, nothing was cut"),
    (b"abc\xc3", 64, "hex", "61 62 63 c3", 0, "a broken last character well under the cap is not UTF-8 either"),
])
def test_shown_bytes(data, cap, encoding, shown, cut, why):
    answer = shown_bytes(data, cap=cap)
    assert (answer["encoding"], answer["shown"], answer["cut"]) == (encoding, shown, cut), why
    assert answer["size"] == (len(data) if data is not None else 0)
