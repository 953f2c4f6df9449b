"""The one fingerprint of what an approval decides (groups.domain.fingerprints)."""

from __future__ import annotations

import pytest

from groups.domain.approval import approval_fingerprint
from groups.domain.expansion.job import plan_fingerprint
from groups.domain.fingerprints import fingerprint


def test_the_same_values_in_another_key_order_fingerprint_the_same():
    assert fingerprint({"a": 1, "b": [1, {"c": 2, "d": 3}]}) == fingerprint({"b": [1, {"d": 3, "c": 2}], "a": 1})


@pytest.mark.parametrize("changed", [{"a": 2, "b": [1]}, {"a": 1, "b": [1, 1]}, {"a": 1}, {"a": "1", "b": [1]}])
def test_any_change_of_a_value_changes_it(changed):
    assert fingerprint(changed) != fingerprint({"a": 1, "b": [1]})


def test_a_value_json_cannot_hold_is_an_error_not_hashed_text():
    with pytest.raises(TypeError):
        fingerprint({"a": object()})


def test_both_kinds_of_plan_use_it():
    plan = {"cluster": "main", "topic": "orders", "current_partitions": 2, "new_partitions": 4,
            "broker_verdict": {"accepted": True}, "groups": [{"group": "g", "kind": "consumer",
                                                               "outcome": "protected_before", "sink": ""}]}
    assert plan_fingerprint(plan) == fingerprint({
        "cluster": "main", "topic": "orders", "current_partitions": 2, "new_partitions": 4, "accepted": True,
        "groups": [["g", "consumer", "protected_before", ""]]})
    assert approval_fingerprint(kind="backfill", params={"sink": "parquet"}, plan=[{"topic": "t"}],
                                findings=[(1, "gap", 3, 4)]) == fingerprint({
        "kind": "backfill", "params": {"sink": "parquet"}, "plan": [{"topic": "t"}], "findings": [[1, "gap", 3, 4]]})
