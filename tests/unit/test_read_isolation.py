"""groups.domain.read_isolation: which records a repair delivers (issue 32)."""

from __future__ import annotations

import pytest

from groups.domain.read_isolation import backfill_isolation_note, isolation_problem, reader_isolation


@pytest.mark.parametrize("declared, reads, why", [
    ("unknown", "read_committed", "not declared: librdkafka's default, which delivers no aborted record"),
    ("read_committed", "read_committed", "declared read_committed"),
    ("read_uncommitted", "read_uncommitted", "only a declared read_uncommitted group gets aborted records"),
])
def test_reader_isolation(declared, reads, why):
    assert reader_isolation(declared) == reads, why


@pytest.mark.parametrize("isolation, problem", [
    ("read_committed", None),
    ("read_uncommitted", None),
    ("unknown", "isolation must be one of read_committed, read_uncommitted, got 'unknown'"),
    (None, "isolation must be one of read_committed, read_uncommitted, got None"),
])
def test_isolation_problem(isolation, problem):
    assert isolation_problem(isolation) == problem


@pytest.mark.parametrize("isolation, declared, note, why", [
    ("read_uncommitted", "read_uncommitted",
     "Reads read_uncommitted, as the group declared: records of aborted transactions are delivered, as the "
     "group's consumers would have read them; commit and abort markers are not records.",
     "aborted records delivered, as the group read them"),
    ("read_committed", "read_committed",
     "Reads read_committed (as the group declared): records of aborted transactions are not delivered, and the "
     "job waits until no open transaction holds the range. Commit and abort markers take offsets but are not "
     "records, so the records delivered can be fewer than the offsets.", "declared: said so"),
    ("read_committed", "unknown",
     "Reads read_committed (the group's isolation level is not declared, so librdkafka's default): records of "
     "aborted transactions are not delivered, and the job waits until no open transaction holds the range. "
     "Commit and abort markers take offsets but are not records, so the records delivered can be fewer than the "
     "offsets.", "not declared: the default named as such"),
])
def test_backfill_isolation_note(isolation, declared, note, why):
    assert backfill_isolation_note(isolation=isolation, declared=declared) == note, why
