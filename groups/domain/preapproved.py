"""The maximum of a repair approved in advance (an expansion's plan, a
standing rule): whether its backfill is queued by itself, waits for the
record count, or is left for a person. One rule for every origin. Pure: no
Django, no Kafka."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from groups.domain.record_counts import COUNT_MAX_OFFSETS

Limit = Literal["queue", "wait", "refuse"]


@dataclass(frozen=True)
class RepairLimit:
    decision: Limit
    reason: str


def repair_within_maximum(*, offsets: int, records: int | None, max_records: int | None,
                          maximum: str) -> RepairLimit:
    """What a pre-approved backfill of ``offsets`` offsets (``records`` of
    them once counted from the log, None before) does under ``max_records``
    (``maximum``: the words that name it, e.g. "the 500 approved in advance"):

    - ``queue``: its records within the maximum, or, before the count, its
      offsets (records are never more than offsets);
    - ``wait``: more offsets than the maximum before the count (markers and
      aborted records take offsets: the records may still fit);
    - ``refuse``: no maximum approved, more records than it, or more offsets
      than it in a range too large to be counted (``COUNT_MAX_OFFSETS``):
      left for a person.
    """
    if max_records is None:
        return RepairLimit("refuse", "no maximum was approved for this repair: left for a person")
    if records is None:
        if offsets <= max_records:
            return RepairLimit("queue", f"{offsets} offsets (so at most as many records) within {maximum}")
        if offsets > COUNT_MAX_OFFSETS:
            return RepairLimit("refuse", f"{offsets} offsets exceed {maximum}, and a range of more than "
                                         f"{COUNT_MAX_OFFSETS} offsets is never counted: left for a person to approve")
        return RepairLimit("wait", f"{offsets} offsets exceed {maximum}: waiting for the record count")
    if records > max_records:
        return RepairLimit("refuse", f"{records} records exceed {maximum}: left for a person to approve")
    return RepairLimit("queue", f"{records} records within {maximum}")
