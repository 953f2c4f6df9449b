"""The URL converter of group ids and topic names (groups.web.converters): each
case is a name, the path segment it travels as, and why."""

from __future__ import annotations

import pytest

from groups.web.converters import NameConverter

ROUND_TRIPS = [
    ("orders.eu-1", "orders.eu-1", "an ordinary name is itself"),
    ("a/b", "a~2Fb", "a server decodes %2F to / before routing: / needs an escape of its own"),
    ("~", "~7E", "the escape character escapes itself"),
    ("~2F", "~7E2F", "text that looks like an escape stays text"),
    (".", "~2E", "a browser resolves a '.' segment away"),
    ("..", "~2E~2E", "and a '..' segment, even written %2E%2E"),
    ("...", "...", "three dots are no dot segment"),
    ("a..b", "a..b", "dots inside a name are no segment"),
    ("", "~", "the empty group id, Kafka's old default"),
    ("100% <b>", "100% <b>", "reverse percent-encodes the rest"),
]


@pytest.mark.parametrize(("name", "segment", "reason"), ROUND_TRIPS, ids=[case[2] for case in ROUND_TRIPS])
def test_it_round_trips(name, segment, reason):
    converter = NameConverter()
    assert converter.to_url(name) == segment, reason
    assert converter.to_python(segment) == name, reason


NO_NAME = [
    ("a\x00b", "a NUL byte: PostgreSQL text cannot hold one, so no row has it"),
    ("~zz", "not one of the three escapes"),
    ("a~2", "an escape cut short"),
    ("~~", "a lone '~' is only ever the whole (empty) name"),
]


@pytest.mark.parametrize(("segment", "reason"), NO_NAME, ids=[case[1] for case in NO_NAME])
def test_a_segment_no_name_gives_matches_nothing(segment, reason):
    with pytest.raises(ValueError):
        NameConverter().to_python(segment)
