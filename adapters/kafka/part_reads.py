"""A split poll's reads (``adapters.kafka.parts`` says what a part is): a
worker answers one part of the watermarks (step 2) or of the groups and their
commits (steps 3 and 4), and the poll's own worker hands the parts out and
merges the answers (``tasks.poll_parts`` carries them)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_END

from adapters.kafka.client import DescribedGroup, TopicDetails
from adapters.kafka.group_reads import GroupReads
from adapters.kafka.list_offsets import OffsetLists, partitions_of
from adapters.kafka.parts import (
    GROUPS,
    WATERMARKS,
    PollParts,
    cut_groups,
    cut_topics,
    groups_in,
    groups_out,
    offsets_in,
    offsets_out,
    raise_error_in,
    topics_in,
    topics_out,
)


class PartReads(OffsetLists, GroupReads):
    def read_watermarks_part(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One part of step 2, on whichever worker runs it: the high
        watermarks of the payload's topics, and which of them are gone."""
        described = topics_in(payload["topics"])
        gone: set[str] = set()
        offsets = self._list_offsets(described, partitions_of(described), OFFSET_END, gone,
                                     time.monotonic() + self._timeout)
        return {"offsets": offsets_out(offsets), "gone": sorted(gone)}

    def read_groups_part(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One part of steps 3 and 4: the payload's groups described, and the
        committed offsets of those still there (through the Java client when
        the payload says the poll uses it and it runs here)."""
        found, committed = self._describe_groups_first(list(payload["groups"]), None, java=payload["java"])
        self._read_commits_left(found, committed, None)
        return {"groups": groups_out(found),
                "committed": {group_id: offsets_out(offsets) for group_id, offsets in committed.items()}}

    def _split_watermarks(self, parts: PollParts, count: int, described: dict[str, TopicDetails],
                          gone: set[str]) -> dict[tuple[str, int], int]:
        answers = parts.run(WATERMARKS, [{"topics": topics_out(described, names)}
                                         for names in cut_topics(described, count)])
        offsets: dict[tuple[str, int], int] = {}
        for answer in answers:
            raise_error_in(answer)
            offsets.update(offsets_in(answer["offsets"]))
            gone.update(answer["gone"])
        return offsets

    def _split_groups(self, parts: PollParts, count: int, group_ids: list[str], *, java: bool,
                      ) -> tuple[list[DescribedGroup], dict[str, dict[tuple[str, int], int]]]:
        answers = parts.run(GROUPS, [{"groups": ids, "java": java} for ids in cut_groups(group_ids, count)])
        found: list[DescribedGroup] = []
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for answer in answers:
            raise_error_in(answer)
            found.extend(groups_in(answer["groups"]))
            committed.update((group_id, offsets_in(rows)) for group_id, rows in answer["committed"].items())
        return sorted(found, key=lambda group: group.group_id), committed
