"""A split poll's parts (adapters.kafka.parts): how a full poll is cut, and that
what a part answers comes back, through JSON, exactly as it was read."""

from __future__ import annotations

import json

import pytest

from groups.domain.snapshot import MemberSnapshot
from adapters.kafka.client import DescribedGroup, TopicDetails
from adapters.kafka.errors import AccessRefused, KafkaUnavailable
from adapters.kafka.parts import (
    cut_groups,
    cut_topics,
    error_out,
    groups_in,
    groups_out,
    offsets_in,
    offsets_out,
    raise_error_in,
    topics_in,
    topics_out,
)


def topics(**counts: int) -> dict[str, TopicDetails]:
    return {name: TopicDetails(name, f"id-{name}", False, tuple(range(count)), 1) for name, count in counts.items()}


@pytest.mark.parametrize(("counts", "parts", "runs"), [
    # Why: near-equal partition counts, whole topics, in name order.
    ({"a": 10, "b": 10, "c": 10, "d": 10}, 2, [["a", "b"], ["c", "d"]]),
    ({"a": 10, "b": 10, "c": 10, "d": 10}, 4, [["a"], ["b"], ["c"], ["d"]]),
    # Why: one big topic is one part; never more parts than asked.
    ({"a": 100, "b": 1, "c": 1}, 2, [["a"], ["b", "c"]]),
    ({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}, 2, [["a", "b", "c"], ["d", "e"]]),
    ({"a": 5}, 4, [["a"]]),
    ({}, 3, [[]]),
])
def test_topics_are_cut_into_parts_of_near_equal_partition_counts(counts, parts, runs):
    cut = cut_topics(topics(**counts), parts)
    assert cut == runs
    assert len(cut) <= parts
    assert sorted(name for run in cut for name in run) == sorted(counts)


@pytest.mark.parametrize(("group_ids", "parts", "runs"), [
    (["a", "b", "c", "d", "e"], 2, [["a", "b", "c"], ["d", "e"]]),
    (["a", "b", "c"], 3, [["a"], ["b"], ["c"]]),
    (["a", "b"], 4, [["a"], ["b"]]),
    ([], 2, [[]]),
])
def test_groups_are_cut_into_parts_of_near_equal_length(group_ids, parts, runs):
    assert cut_groups(group_ids, parts) == runs


def test_what_a_part_reads_comes_back_through_json_exactly():
    described = {"t<1>": TopicDetails("t<1>", "AAAA+/==", True, (0, 2, 5), 3, may_read=True, may_write=None),
                 "u": TopicDetails("u", "", False, (), 1, may_read=False, may_write=False)}
    assert topics_in(json.loads(json.dumps(topics_out(described, ["t<1>", "u"])))) == described
    offsets = {("t<1>", 0): 0, ("t<1>", 5): 2**62, ("u", 1): 7}
    assert offsets_in(json.loads(json.dumps(offsets_out(offsets)))) == offsets
    groups = [
        DescribedGroup("g\x01<script>", "Stable", "consumer", "uniform", (
            MemberSnapshot("m1", "c1", "/127.0.0.1", frozenset({("t<1>", 0), ("u", 1)}), frozenset({("t<1>", 2)})),
            MemberSnapshot("m2", "", "", frozenset()),
        )),
        DescribedGroup("empty", "Empty", "classic", "", ()),
    ]
    assert groups_in(json.loads(json.dumps(groups_out(groups)))) == groups


@pytest.mark.parametrize("error", [
    KafkaUnavailable("Kafka at b:9092: watermarks: no answer within 10s", bootstrap_servers="b:9092", stage="watermarks"),
    AccessRefused("Kafka at b:9092: groups: missing ACL: Describe on group 'g'", bootstrap_servers="b:9092",
                  stage="groups"),
])
def test_a_part_that_failed_fails_the_poll_as_the_part_failed(error):
    with pytest.raises(type(error)) as raised:
        raise_error_in(json.loads(json.dumps(error_out(error))))
    assert (type(raised.value), str(raised.value), raised.value.stage, raised.value.bootstrap_servers) == (
        type(error), str(error), error.stage, error.bootstrap_servers)


def test_an_answer_without_an_error_raises_nothing():
    raise_error_in({"offsets": [], "gone": []})
