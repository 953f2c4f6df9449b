"""Which partitions a guard should treat as known (groups.domain.known_partitions).
Each case says why its answer is right.

Topic ``orders`` has partitions 0..3 in the snapshot; group ``billing`` reads
it. Partitions 2 and 3 are new (findings) unless a case says otherwise.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from groups.domain.known_partitions import known_partition_sets
from groups.domain.snapshot import GroupSnapshot, MemberSnapshot, PartitionOffsets, Snapshot, TopicSnapshot

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def snapshot(*, committed: dict, assignment=frozenset(), topics=("orders",), group_id="billing") -> Snapshot:
    return Snapshot(
        cluster="local", taken_at=T0,
        topics=tuple(
            TopicSnapshot(name, f"id-{name}", False, tuple(PartitionOffsets(p, 0, 10) for p in range(4)))
            for name in topics
        ),
        groups=(GroupSnapshot(group_id, "Stable", "classic", "range",
                              (MemberSnapshot("m1", "c1", "h1", frozenset(assignment)),), dict(committed)),),
    )


ALL_COMMITTED = {("orders", p): 5 for p in range(4)}
OLD_COMMITTED = {("orders", 0): 5, ("orders", 1): 5}


@pytest.mark.parametrize(
    ("snap", "findings", "consumed_before", "expected", "why"),
    [
        (snapshot(committed=OLD_COMMITTED), {("orders", "billing"): {2, 3}}, {"billing": frozenset({"orders"})},
         {("orders", "billing"): frozenset({0, 1})},
         "new partitions without a commit are not known: a guard must start them at the beginning"),
        (snapshot(committed={**OLD_COMMITTED, ("orders", 2): 7}), {("orders", "billing"): {2, 3}},
         {"billing": frozenset({"orders"})}, {("orders", "billing"): frozenset({0, 1, 2})},
         "once the group committed on a new partition it is known: a guard must not rewind it"),
        (snapshot(committed=ALL_COMMITTED), {}, {"billing": frozenset({"orders"})},
         {("orders", "billing"): frozenset({0, 1, 2, 3})},
         "no findings: every partition of the topic is known"),
        (snapshot(committed=OLD_COMMITTED), {("orders", "billing"): {2, 3}}, {},
         {}, "a pair seen for the first time is left out: the guard's own set must win"),
        (snapshot(committed=OLD_COMMITTED), {("orders", "billing"): {2, 3}}, {"billing": frozenset({"payments"})},
         {}, "the group consumed another topic before, not this one: first sight of the pair"),
        (snapshot(committed={("gone", 0): 3}, topics=("orders",)), {}, {"billing": frozenset({"gone"})},
         {}, "a topic the snapshot does not hold (deleted) gets no set"),
        (snapshot(committed={}, assignment={("orders", 0), ("orders", 2)}), {("orders", "billing"): {2}},
         {"billing": frozenset({"orders"})}, {("orders", "billing"): frozenset({0, 1, 3})},
         "a topic read only through an assignment (no commit yet) still gets its set"),
        (snapshot(committed=OLD_COMMITTED), {("orders", "other"): {2, 3}}, {"billing": frozenset({"orders"})},
         {("orders", "billing"): frozenset({0, 1, 2, 3})},
         "another group's findings do not hide partitions from this group"),
        (snapshot(committed={**{(name, 0): 1 for name in ("a", "b", "c", "d", "e")}, ("new", 0): 1},
                  topics=("a", "b", "c", "d", "e", "new")),
         {}, {"billing": frozenset({"a", "b", "c", "d", "e"})},
         {(name, "billing"): frozenset({0, 1, 2, 3}) for name in ("a", "b", "c", "d", "e")},
         "a topic the group reads for the first time is skipped; its other topics still get their sets"),
    ],
)
def test_it_computes_the_known_partitions(snap, findings, consumed_before, expected, why):
    assert known_partition_sets(snapshot=snap, finding_partitions=findings, consumed_before=consumed_before) \
        == expected, why
