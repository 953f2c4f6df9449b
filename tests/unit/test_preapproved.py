"""The maximum of a repair approved in advance (groups.domain.preapproved),
one rule for an expansion's plan and a standing rule. Each case says why."""

from __future__ import annotations

import pytest

from groups.domain.preapproved import repair_within_maximum
from groups.domain.record_counts import COUNT_MAX_OFFSETS

LIMIT = "the 100 approved in advance"
HUGE = COUNT_MAX_OFFSETS + 1

CASES = [
    # offsets, records, maximum, decision, reason
    (100, None, 100, "queue", f"100 offsets (so at most as many records) within {LIMIT}"),  # exactly the maximum
    (1, None, 100, "queue", f"1 offsets (so at most as many records) within {LIMIT}"),
    (101, None, 100, "wait", f"101 offsets exceed {LIMIT}: waiting for the record count"),  # the records may fit
    (101, 100, 100, "queue", f"100 records within {LIMIT}"),  # markers took an offset: the records fit
    (101, 101, 100, "refuse", f"101 records exceed {LIMIT}: left for a person to approve"),
    (5, 5, 100, "queue", f"5 records within {LIMIT}"),
    (COUNT_MAX_OFFSETS, None, 100, "wait", f"{COUNT_MAX_OFFSETS} offsets exceed {LIMIT}: waiting for the record count"),
    (HUGE, None, 100, "refuse", f"{HUGE} offsets exceed {LIMIT}, and a range of more than {COUNT_MAX_OFFSETS} "
                                "offsets is never counted: left for a person to approve"),  # no count will come
    (HUGE, None, HUGE, "queue", f"{HUGE} offsets (so at most as many records) within {LIMIT}"),
    (0, None, None, "refuse", "no maximum was approved for this repair: left for a person"),
    (1, 1, None, "refuse", "no maximum was approved for this repair: left for a person"),
]


@pytest.mark.parametrize("offsets, records, maximum, decision, reason", CASES, ids=[str(c[:3]) for c in CASES])
def test_a_preapproved_repair_is_queued_only_within_its_maximum(offsets, records, maximum, decision, reason):
    limit = repair_within_maximum(offsets=offsets, records=records, max_records=maximum, maximum=LIMIT)
    assert (limit.decision, limit.reason) == (decision, reason)
