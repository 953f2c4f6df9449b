"""The pure rules of a bulk approval (groups.domain.approval): which finding
it refuses before planning, and what its preview's fingerprint covers. Each
case says why its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.approval import approval_fingerprint, bulk_refusal

OPEN = None

REFUSALS = [
    # (state, closed_reason, active_job, expected, why)
    ("gap", OPEN, None, None, "an open loss with nothing on it is planned"),
    ("undecided", OPEN, None, None, "undecided still has a definite loss to repair"),
    ("pending", OPEN, None, None, "the plan (not this rule) decides what a pending finding allows"),
    ("gap", "dismissed: noise", None, "closed already (dismissed: noise)", "a closed finding takes no job"),
    ("covered", "repaired", None, "closed already (repaired)", "closed is said first: it is the way out taken"),
    ("covered", OPEN, None, "covered: the group read the new partition from its start; nothing to repair",
     "covered is good news, not work"),
    ("gap", OPEN, (7, "reset", "running"), "reset job 7 is running on it",
     "a job of the same kind would be a duplicate"),
    ("gap", OPEN, (8, "backfill", "requested"), "backfill job 8 is requested on it",
     "a bulk action stacks no second repair on a finding under a job of another kind"),
    ("covered", OPEN, (9, "reset", "queued"), "covered: the group read the new partition from its start; "
     "nothing to repair", "nothing to repair is the better reason than the job"),
]


@pytest.mark.parametrize("state, closed_reason, active_job, expected, why", REFUSALS,
                         ids=[case[-1] for case in REFUSALS])
def test_bulk_refusal(state, closed_reason, active_job, expected, why):
    assert bulk_refusal(state=state, closed_reason=closed_reason, active_job=active_job) == expected, why


RESET_ROW = {"topic": "orders", "partition": 2, "log_start": 0, "high_watermark": 100, "current": 60,
             "planned": 0, "redelivered": 60, "skipped": 0, "clamped": False, "note": ""}
BACKFILL_ROW = {"topic": "orders", "partition": 2, "start": 0, "end": 40, "count": 40, "definite": 30,
                "possible": 10, "basis": "first commit (a bound)"}


def fingerprint(*, finding_id=3, state="gap", missed_definite=30, missed_possible=10, findings=None, **changes):
    values = {"kind": "reset", "params": {"target": "earliest", "value": None}, "plan": [RESET_ROW],
              "findings": findings if findings is not None else [(finding_id, state, missed_definite, missed_possible)],
              **changes}
    return approval_fingerprint(**values)


SAME = fingerprint()
FINGERPRINTS = [
    # (changes, same as SAME?, why)
    ({}, True, "the same preview fingerprints the same"),
    ({"plan": [{**RESET_ROW, "high_watermark": 180, "redelivered": 75, "current": 75}]}, True,
     "a reset re-reads the live offsets when it runs: traffic since the preview changes nothing it decides"),
    ({"plan": [{**RESET_ROW, "planned": 5}]}, False, "the offset a reset commits is what it decides"),
    ({"plan": [{**RESET_ROW, "clamped": True}]}, False, "a clamp changes what the target means"),
    ({"kind": "backfill", "plan": [BACKFILL_ROW]}, False, "another kind is another job"),
    ({"finding_id": 4}, False, "another finding's fingerprint does not approve this one"),
    ({"params": {"target": "earliest", "value": 5}}, False, "the job stores its params"),
    ({"state": "undecided"}, False, "a finding that changed state was re-accounted"),
    ({"missed_possible": 11}, False, "the loss shown is not the loss now"),
    ({"missed_definite": 31}, False, "the definite loss shown is not the loss now"),
    ({"findings": [(3, "gap", 30, 10), (4, "gap", 1, 1)]}, False, "a job of more findings is another job"),
]


def test_the_order_the_findings_come_in_does_not_matter_what_each_says_does():
    two = [(3, "gap", 30, 10), (4, "pending", 0, 0)]
    assert fingerprint(findings=two) == fingerprint(findings=list(reversed(two)))
    assert fingerprint(findings=two) != fingerprint(findings=[(3, "gap", 30, 10), (4, "gap", 0, 0)])


@pytest.mark.parametrize("changes, same, why", FINGERPRINTS, ids=[case[-1] for case in FINGERPRINTS])
def test_approval_fingerprint(changes, same, why):
    assert (fingerprint(**changes) == SAME) is same, why


def test_a_backfills_fingerprint_covers_its_whole_range():
    base = fingerprint(kind="backfill", plan=[BACKFILL_ROW], params={"sink": "parquet"})
    for key, value in (("end", 41), ("start", 1), ("possible", 11), ("basis", "current end")):
        assert fingerprint(kind="backfill", plan=[{**BACKFILL_ROW, key: value}], params={"sink": "parquet"}) != base, key
    assert fingerprint(kind="backfill", plan=[BACKFILL_ROW], params={"sink": "kafka"}) != base
