"""Which records a repair delivers to a group: its consumers' ``isolation.level``.

The broker does not know a group's isolation level; an operator may declare
it (``ConsumerGroup.declared_isolation``). A ``read_committed`` reader never
sees the records of an aborted transaction; a ``read_uncommitted`` one does.
Neither sees a commit or abort marker, though each takes an offset. So a
backfill reads the range as the group would have read it, and counts records,
not offsets. Pure: no Django, no Kafka.
"""

from __future__ import annotations

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
ISOLATION_LEVELS = (READ_COMMITTED, READ_UNCOMMITTED)
UNKNOWN = "unknown"


def reader_isolation(declared: str) -> str:
    """The isolation a backfill reads with for a group that declared ``declared``.

    Only a declared ``read_uncommitted`` reads aborted records: ``unknown``
    reads ``read_committed``, librdkafka's default, which never delivers a
    record no group should act on (an aborted one)."""
    return READ_UNCOMMITTED if declared == READ_UNCOMMITTED else READ_COMMITTED


def isolation_problem(isolation: object) -> str | None:
    """Why ``isolation`` is no isolation level a reader can have, or None."""
    if isolation not in ISOLATION_LEVELS:
        return f"isolation must be one of {', '.join(ISOLATION_LEVELS)}, got {isolation!r}"
    return None


def backfill_isolation_note(*, isolation: str, declared: str) -> str:
    """What a backfill preview says about the records it delivers."""
    if isolation == READ_UNCOMMITTED:
        return ("Reads read_uncommitted, as the group declared: records of aborted transactions are delivered, "
                "as the group's consumers would have read them; commit and abort markers are not records.")
    source = "as the group declared" if declared == READ_COMMITTED else \
        "the group's isolation level is not declared, so librdkafka's default"
    return (f"Reads read_committed ({source}): records of aborted transactions are not delivered, and the job "
            "waits until no open transaction holds the range. Commit and abort markers take offsets but are not "
            "records, so the records delivered can be fewer than the offsets.")


# A reset moves the group's committed offset; what its members read from there
# is decided by their own isolation.level, so nothing about it changes.
RESET_ISOLATION_NOTE = ("Transactions need no change here: the group's consumers read from the reset offset with "
                        "their own isolation.level (a read_committed member skips aborted records and waits for "
                        "open transactions by itself).")
