"""Which records the Spark server's warm-up reads (``warm_up_range``)."""

from __future__ import annotations

import pytest

from groups.domain.planning import BackfillRange
from groups.domain.snapshot import PartitionOffsets
from adapters.spark.warm_up import warm_up_range, within_bytes


def offsets(**held: tuple[int | None, int]) -> dict[tuple[str, int], PartitionOffsets]:
    """``t_3=(log start, high watermark)`` -> {("t", 3): PartitionOffsets}."""
    found = {}
    for name, (log_start, high) in held.items():
        topic, partition = name.rsplit("_", 1)
        found[(topic, int(partition))] = PartitionOffsets(int(partition), log_start, high)
    return found


@pytest.mark.parametrize(("held", "records", "expected"), [
    ({}, 10, None),
    ({"a_0": (0, 0), "b_1": (7, 7)}, 10, None),  # nothing retained anywhere
    ({"a_0": (0, 5)}, 10, BackfillRange("a", 0, 0, 5)),  # fewer than asked: all of it
    ({"a_0": (0, 50)}, 10, BackfillRange("a", 0, 40, 50)),  # the newest records
    ({"a_0": (30, 50)}, 10, BackfillRange("a", 0, 40, 50)),
    ({"a_0": (45, 50)}, 10, BackfillRange("a", 0, 45, 50)),  # retention took the rest
    ({"a_0": (0, 50), "b_0": (0, 60), "c_0": (0, 55)}, 10, BackfillRange("b", 0, 50, 60)),  # the fullest
    ({"a_0": (40, 50), "b_0": (0, 20)}, 10, BackfillRange("b", 0, 10, 20)),  # held, not the highest offset
    ({"b_0": (0, 20), "a_1": (0, 20), "a_0": (0, 20)}, 10, BackfillRange("a", 0, 10, 20)),  # equals: by name
    ({"a_2": (0, 20), "a_1": (0, 20)}, 10, BackfillRange("a", 1, 10, 20)),  # then by partition
    ({"a_0": (None, 20)}, 10, BackfillRange("a", 0, 10, 20)),  # log start not read: from 0
    ({"a_0": (0, 20)}, 1, BackfillRange("a", 0, 19, 20)),
])
def test_the_warm_up_reads_the_newest_records_of_the_fullest_partition(held, records, expected):
    assert warm_up_range(offsets(**held), records=records) == expected


@pytest.mark.parametrize(("source", "sizes", "max_bytes", "expected"), [
    (BackfillRange("a", 0, 100, 500), [], 1000, BackfillRange("a", 0, 100, 500)),  # nothing sampled: whole
    (BackfillRange("a", 0, 100, 500), [2, 2], 1000, BackfillRange("a", 0, 100, 500)),  # 400 x 2 B fit
    (BackfillRange("a", 0, 100, 500), [10, 10], 1000, BackfillRange("a", 0, 400, 500)),  # 100 x 10 B
    (BackfillRange("a", 0, 100, 500), [5, 15], 1000, BackfillRange("a", 0, 400, 500)),  # by the mean
    (BackfillRange("a", 0, 100, 500), [10, 10], 999, BackfillRange("a", 0, 401, 500)),  # rounded down
    (BackfillRange("a", 0, 100, 500), [5000], 1000, BackfillRange("a", 0, 499, 500)),  # at least one record
    (BackfillRange("a", 3, 100, 500), [0, 0], 10, BackfillRange("a", 3, 490, 500)),  # empty records: 1 B each
])
def test_the_warm_ups_read_is_cut_to_its_bytes(source, sizes, max_bytes, expected):
    assert within_bytes(source, sizes, max_bytes=max_bytes) == expected
