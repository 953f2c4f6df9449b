"""Redis key layout shared with the Gapwatch control plane.

    gapwatch:known-partitions:<cluster>:<topic>:<group id>   set of partition ids
    gapwatch:guard-starts:<cluster>:<topic>:<group id>       hash partition id -> offset

Partition ids and offsets are decimal strings. ``<cluster>`` is the cluster's
name in Gapwatch (a slug); topic names cannot contain ':', so everything after
the third ':' is the group id, whatever it contains.
"""

from __future__ import annotations

KNOWN_PARTITIONS_PREFIX = "gapwatch:known-partitions"
GUARD_STARTS_PREFIX = "gapwatch:guard-starts"


def known_partitions_key(*, cluster: str, topic: str, group_id: str) -> str:
    """The set of partitions the group knew at its current generation."""
    return f"{KNOWN_PARTITIONS_PREFIX}:{cluster}:{topic}:{group_id}"


def guard_starts_key(*, cluster: str, topic: str, group_id: str) -> str:
    """Where a guard started each new partition: the log start offset it looked up."""
    return f"{GUARD_STARTS_PREFIX}:{cluster}:{topic}:{group_id}"
