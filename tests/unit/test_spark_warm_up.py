"""Which records the Spark server's warm-up reads (``warm_up_range``)."""

from __future__ import annotations

import pytest

from groups.domain.planning import BackfillRange
from groups.domain.snapshot import PartitionOffsets
from tasks.spark.warm_up import warm_up_range


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
