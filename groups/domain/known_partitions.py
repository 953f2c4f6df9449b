"""Which partitions a consumer-side guard should treat as known: pure, from
one poll's snapshot and what the control plane already stored.

The Redis writes live in ``groups.services.known_partitions``.
"""

from __future__ import annotations

from groups.domain.snapshot import Snapshot


def known_partition_sets(
    *, snapshot: Snapshot, finding_partitions: dict[tuple[str, str], set[int]],
    consumed_before: dict[str, frozenset[str]],
) -> dict[tuple[str, str], frozenset[int]]:
    """(topic, group id) -> known partitions, for every group and topic it reads.

    Known: every partition of the topic except those that became a finding
    (open or dismissed) on which the group has not committed yet. A pair seen
    for the first time is left out: the poller cannot know which partitions
    existed at the group's first start, and a guard's own set must win then.
    """
    partitions = {topic.name: topic.partition_ids for topic in snapshot.topics}
    sets = {}
    for group in snapshot.groups:
        for topic in group.topics():
            if topic not in partitions or topic not in consumed_before.get(group.group_id, frozenset()):
                continue
            uncommitted_new = {
                partition for partition in finding_partitions.get((topic, group.group_id), ())
                if (topic, partition) not in group.committed
            }
            sets[(topic, group.group_id)] = frozenset(partitions[topic] - uncommitted_new)
    return sets
