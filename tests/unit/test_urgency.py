"""When retention may delete a finding's first missed record: the table of
cases is the proof, each with why its answer is right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from groups.domain.urgency import Retention, expiry_estimate_at
from groups.urgency_text import expiry_short, expiry_words, retention_words

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOUR_MS = 3_600_000
SEVEN_DAYS_MS = 7 * 24 * HOUR_MS

CASES = [
    # (retention, first record's timestamp, expected expiry, words expected, why)
    (Retention(SEVEN_DAYS_MS, -1, "delete"), NOW - timedelta(days=7) + timedelta(hours=5),
     NOW + timedelta(hours=5), "expires in ~5 h (estimate",
     "seven days after its timestamp, five hours from now: the earliest retention.ms may delete it"),
    (Retention(HOUR_MS, -1, "delete"), NOW - timedelta(hours=2), NOW - timedelta(hours=1),
     "may be deleted already", "an hour past retention.ms: whether it is gone depends on its segment"),
    (Retention(-1, 1_000_000, "delete"), NOW, None, "cannot be estimated from time alone",
     "only retention.bytes limits it: what is written next decides"),
    (Retention(-1, -1, "delete"), NOW, None, "no time or size limit", "nothing deletes it"),
    (Retention(HOUR_MS, -1, "compact"), NOW, None, "compaction only",
     "a compacted topic never deletes by age; retention.ms does not apply"),
    (Retention(HOUR_MS, -1, "compact,delete"), NOW - timedelta(minutes=30), NOW + timedelta(minutes=30),
     "expires in ~30 min", "compact,delete also deletes by age"),
    (Retention(HOUR_MS, 5_000, "delete"), NOW, NOW + timedelta(hours=1), "retention.bytes may delete it sooner",
     "both limits: time gives the latest estimate, size can come first"),
    (Retention(HOUR_MS, -1, "delete"), None, None, "timestamp is not known",
     "no timestamp: nothing to count from"),
]


@pytest.mark.parametrize(("retention", "timestamp", "expires", "words", "why"), CASES,
                         ids=[case[-1] for case in CASES])
def test_it_estimates_when_retention_may_delete_the_first_missed_record(retention, timestamp, expires, words, why):
    assert expiry_estimate_at(retention=retention, first_timestamp=timestamp) == expires, why
    assert words in expiry_words(retention=retention, first_timestamp=timestamp, now=NOW), why


def test_it_says_an_estimate_is_an_estimate_in_few_words():
    assert expiry_short(expires_at=NOW + timedelta(hours=5), now=NOW) == "expires in ~5 h (estimate)"
    assert expiry_short(expires_at=NOW - timedelta(seconds=1), now=NOW) == "may be deleted already (estimate)"
    assert expiry_short(expires_at=None, now=NOW) == ""


def test_it_words_the_retention():
    assert retention_words(Retention(SEVEN_DAYS_MS, -1, "delete")) == "7 d (retention.ms=604800000), no size limit"
    assert "compaction only" in retention_words(Retention(SEVEN_DAYS_MS, -1, "compact"))
