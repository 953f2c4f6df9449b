"""A split poll's parts as JSON (``tasks.poll_parts`` carries them between
Celery workers): what a part is asked to read and what it answers, and how a
full poll's partitions and groups are cut into parts.

Plain functions over plain data: the snapshot (``adapters.kafka.snapshot``) runs
a part and merges the answers; nothing here talks to Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from groups.domain.snapshot import MemberSnapshot
from adapters.kafka.client import DescribedGroup, TopicDetails
from adapters.kafka.errors import AccessRefused, KafkaUnavailable

WATERMARKS, GROUPS = "watermarks", "groups"


class PollParts(Protocol):
    """Runs one stage of a full poll in parts, on whatever workers take them,
    and returns every part's answer in the order of ``payloads``. All answers
    are in when it returns (the snapshot's order rests on it: every high
    watermark is read before any group), or it raises ``KafkaUnavailable``."""

    def run(self, kind: str, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]: ...


def cut_topics(described: Mapping[str, TopicDetails], parts: int) -> list[list[str]]:
    """Topic names in at most ``parts`` runs of near-equal partition counts
    (whole topics: a part asks its topics again when one is in trouble)."""
    names = sorted(described)
    total = sum(described[name].partitions for name in names)
    runs: list[list[str]] = [[]]
    done = 0
    for name in names:
        if runs[-1] and done >= total * len(runs) / parts:
            runs.append([])
        runs[-1].append(name)
        done += described[name].partitions
    return runs


def cut_groups(group_ids: Sequence[str], parts: int) -> list[list[str]]:
    """Group ids in at most ``parts`` runs of near-equal length, in order."""
    size = -(-len(group_ids) // parts) if group_ids else 1
    return [list(group_ids[start:start + size]) for start in range(0, len(group_ids), size)] or [[]]


def topics_out(described: Mapping[str, TopicDetails], names: Sequence[str]) -> list[list[Any]]:
    return [[name, described[name].topic_id, described[name].is_internal, list(described[name].partition_ids),
             described[name].replication_factor, described[name].may_read, described[name].may_write]
            for name in names]


def topics_in(rows: Sequence[Sequence[Any]]) -> dict[str, TopicDetails]:
    return {str(name): TopicDetails(str(name), str(topic_id), bool(internal), tuple(int(p) for p in partitions),
                                    int(replication), may_read, may_write)
            for name, topic_id, internal, partitions, replication, may_read, may_write in rows}


def offsets_out(offsets: Mapping[tuple[str, int], int]) -> list[list[Any]]:
    return [[topic, partition, offset] for (topic, partition), offset in offsets.items()]


def offsets_in(rows: Sequence[Sequence[Any]]) -> dict[tuple[str, int], int]:
    return {(str(topic), int(partition)): int(offset) for topic, partition, offset in rows}


def _pairs_out(pairs: frozenset[tuple[str, int]]) -> list[list[Any]]:
    return [[topic, partition] for topic, partition in sorted(pairs)]


def _pairs_in(rows: Sequence[Sequence[Any]]) -> frozenset[tuple[str, int]]:
    return frozenset((str(topic), int(partition)) for topic, partition in rows)


def groups_out(groups: Sequence[DescribedGroup]) -> list[dict[str, Any]]:
    return [{"group_id": group.group_id, "state": group.state, "type": group.type, "assignor": group.assignor,
             "members": [{"member_id": member.member_id, "client_id": member.client_id, "host": member.host,
                          "assignment": _pairs_out(member.assignment),
                          "target_assignment": _pairs_out(member.target_assignment)}
                         for member in group.members]}
            for group in groups]


def groups_in(rows: Sequence[Mapping[str, Any]]) -> list[DescribedGroup]:
    return [DescribedGroup(
        group_id=row["group_id"], state=row["state"], type=row["type"], assignor=row["assignor"],
        members=tuple(MemberSnapshot(member_id=member["member_id"], client_id=member["client_id"],
                                     host=member["host"], assignment=_pairs_in(member["assignment"]),
                                     target_assignment=_pairs_in(member["target_assignment"]))
                      for member in row["members"]))
        for row in rows]


def error_out(error: KafkaUnavailable) -> dict[str, Any]:
    return {"error": str(error), "stage": error.stage, "bootstrap_servers": error.bootstrap_servers,
            "refused": isinstance(error, AccessRefused)}


def raise_error_in(answer: Mapping[str, Any]) -> None:
    """A part's answer that is an error raises it again, as the part raised it."""
    if "error" in answer:
        kind = AccessRefused if answer.get("refused") else KafkaUnavailable
        raise kind(str(answer["error"]), bootstrap_servers=str(answer.get("bootstrap_servers", "")),
                   stage=str(answer.get("stage", "")))
