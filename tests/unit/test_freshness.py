"""The freshness rule of the page header (groups.domain.freshness) and the
pages' relative times (groups.templatetags.gapwatch), table-driven: each
case says why its answer is right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from groups.domain.freshness import cluster_freshness, late_after
from groups.templatetags.gapwatch import absolute, relative

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
INTERVAL = timedelta(seconds=10)
S = timedelta(seconds=1)


@pytest.mark.parametrize(("unreachable", "last_success", "registered", "expected", "why"), [
    (False, NOW - 5 * S, NOW - timedelta(days=1), "current", "polled within the interval"),
    (False, NOW - 30 * S, NOW - timedelta(days=1), "current", "three intervals (30 s) is the limit, not past it"),
    (False, NOW - 31 * S, NOW - timedelta(days=1), "late", "no success for over three intervals"),
    (True, NOW - 5 * S, NOW - timedelta(days=1), "unreachable", "the last poll failed, however recent a success"),
    (True, None, NOW - 5 * S, "unreachable", "a new cluster whose first poll failed"),
    (False, None, NOW - 5 * S, "waiting", "registered seconds ago: its first poll is not due yet"),
    (False, None, NOW - 30 * S, "waiting", "registered exactly three intervals ago: overdue only past the limit"),
    (False, None, NOW - timedelta(minutes=5), "late", "registered long ago and never polled: beat is not running"),
])
def test_cluster_freshness(unreachable, last_success, registered, expected, why):
    answer = cluster_freshness(name="prod", unreachable=unreachable, last_success_at=last_success,
                               first_seen_at=registered, error="down", now=NOW, poll_interval=INTERVAL)
    assert answer.freshness == expected, why
    assert (answer.name, answer.last_success_at) == ("prod", last_success), "the header names it and its last success"
    assert answer.needs_attention == (expected in ("late", "unreachable")), why
    assert answer.error == ("down" if unreachable else ""), "only an unreachable cluster shows its error"


def test_a_short_interval_still_allows_thirty_seconds():
    # A 1 s interval would call a cluster late after 3 s: one slow poll is not an outage.
    assert late_after(poll_interval=S) == 30 * S
    assert late_after(poll_interval=60 * S) == 180 * S


@pytest.mark.parametrize(("moment", "expected", "why"), [
    (NOW, "just now", "no time has passed"),
    (NOW - 12 * S, "12 s ago", "seconds below a minute"),
    (NOW - 119 * S, "1 min ago", "whole minutes, rounded down"),
    (NOW - timedelta(hours=3, minutes=59), "3 h ago", "whole hours"),
    (NOW - timedelta(days=2, hours=5), "2 d ago", "whole days"),
    (NOW + timedelta(minutes=5), "in 5 min", "a deadline ahead"),
])
def test_relative(moment, expected, why):
    assert relative(moment, now=NOW) == expected, why


def test_absolute_is_utc_whatever_the_zone_given():
    tokyo = datetime(2026, 11, 25, 21, 0, 5, 123456, tzinfo=timezone_hours(9))
    assert absolute(tokyo) == "2026-11-25 12:00:05 UTC"
    assert absolute(tokyo, precise=True) == "2026-11-25 12:00:05.123 UTC"


def timezone_hours(hours: int):
    from datetime import timezone

    return timezone(timedelta(hours=hours))
