"""The poll's reads of a whole cluster through Kafka's Java client and the
Java helpers beside it (``adapters/kafka/java``, compiled by ``scripts/setup.sh``):
topic ids, every topic's partition count, consumer groups with their
commits, and which groups read some topics, each answer one text over the
gateway, parsed here. At 60,000 partitions and 3,000 groups librdkafka's
answers were one Python object a partition or member (issue 24)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from py4j.java_gateway import JavaClass

from groups.domain.snapshot import MemberSnapshot
from adapters.kafka.client import DescribedGroup
from adapters.kafka.java_client import JavaClient

# One TopicListing as Java prints it (Kafka 4.x), inside the list's "[...]".
# Topic names are [A-Za-z0-9._-] and ids URL-safe base64, so the text parses
# unambiguously; every listing must parse, or none is believed.
_TOPIC_LISTING = re.compile(r"\(name=([A-Za-z0-9._-]+), topicId=([A-Za-z0-9_-]+), internal=(true|false)\)")


class JavaReads(JavaClient):
    """The cluster-wide reads. Those through a helper of ``adapters/kafka/java``
    answer None where it is not installed, for the caller to ask librdkafka."""

    def topic_ids(self) -> dict[str, tuple[str, bool]]:
        """Every topic the principal may Describe: name -> (topic id, internal),
        from the Java client's topic listing (one Metadata request). Returned
        as one text (the listing's ``toString``), not object by object: a
        gateway call per topic cost a millisecond each."""
        with self._calls("list topics"):
            options = self._jvm.org.apache.kafka.clients.admin.ListTopicsOptions().listInternal(True)
            text = str(self._get(self._client.listTopics(options.timeoutMs(self._timeout_ms)).listings()).toString())
        return parse_topic_listings(text)

    def log_dirs_text(self, brokers: Sequence[int]) -> str:
        """DescribeLogDirs of ``brokers`` as Java prints its answer (every
        replica each broker holds, with its size): one text over the gateway;
        ``adapters.kafka.topic_state`` picks one topic's replicas from it."""
        with self._calls("log dirs"):
            ids = self._jvm.java.util.ArrayList()
            for broker in brokers:
                ids.add(self._jvm.java.lang.Integer(broker))
            return str(self._get(self._client.describeLogDirs(ids).allDescriptions()).toString())

    def partition_counts(self) -> dict[str, int] | None:
        """Every topic's partition count from one Metadata request, through the
        Java helper ``gapwatch.TopicCounts`` (adapters/kafka/java, compiled by
        setup.sh): one line per topic over the gateway. None when the helper
        is not installed here."""
        helper = self._jvm.gapwatch.TopicCounts
        if not isinstance(helper, JavaClass):
            return None
        with self._calls("topic partition counts"):
            text = str(helper.of(self._metadata_consumer, self._timeout_ms))
        return parse_partition_counts(text)

    def topic_readers(self, group_ids: Sequence[str], counts: Mapping[str, int]) -> set[str] | None:
        """Which of the classic and consumer groups ``group_ids`` read any of
        the topics in ``counts`` (name -> partition count): a member assigned
        or targeted one of their partitions, or a commit on one; a group whose
        answer is an error is named too. Asked inside the JVM by the poll's
        group reader (``gapwatch.GroupReads.readers``), which answers only the
        readers' ids. None when the helper is not installed here."""
        helper = self._jvm.gapwatch.GroupReads
        if not isinstance(helper, JavaClass):
            return None
        with self._calls("topic readers"):
            text = str(helper.readers(self._client, encode_group_ids(group_ids),
                                      "".join(f"{name} {count}\n" for name, count in counts.items()),
                                      self._timeout_ms))
        return parse_group_ids(text)

    def read_groups(
        self, group_ids: Sequence[str], partitions: Sequence[tuple[str, int]] | None = None,
    ) -> GroupReads | None:
        """Classic and consumer groups described, then their committed offsets
        (all of each group's, or only on ``partitions``), through the Java
        helper ``gapwatch.GroupReads``: the Admin batches both per coordinator,
        and one JSON text crosses the gateway. None when the helper is not
        installed here."""
        helper = self._jvm.gapwatch.GroupReads
        if not isinstance(helper, JavaClass):
            return None
        with self._calls("describe groups and read their offsets"):
            text = str(helper.of(self._client, encode_group_ids(group_ids),
                                 "".join(f"{topic} {partition}\n" for topic, partition in partitions or ()),
                                 self._timeout_ms))
        return parse_group_reads(text)


@dataclass(frozen=True)
class GroupReads:
    """``gapwatch.GroupReads``' answer: the groups read, each one's commits,
    and the ones it could not read (for librdkafka to read and word)."""

    groups: tuple[DescribedGroup, ...]
    committed: dict[str, dict[tuple[str, int], int]]
    others: tuple[str, ...]


# The states librdkafka names (adapters.kafka.client); Java's others (KIP-848's
# Assigning, Reconciling) read as librdkafka reads them, "Unknown".
_CLIENT_STATES = frozenset({"Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Dead"})


def encode_group_ids(group_ids: Iterable[str]) -> str:
    """Group ids for a Java helper: "length:id" after one another (code points)."""
    return "".join(f"{len(group_id)}:{group_id}" for group_id in group_ids)


def parse_group_reads(text: str) -> GroupReads:
    """``gapwatch.GroupReads``' JSON as plain data, as librdkafka's reading
    gives it (``adapters.kafka.client.group_from``). Raises ValueError unless it parses."""
    try:
        answer = json.loads(text)
        groups, committed = [], {}
        for row in answer["groups"]:
            members = (MemberSnapshot(member_id=str(member_id), client_id=str(client_id), host=str(host),
                                      assignment=frozenset((str(t), int(p)) for t, p in assigned),
                                      target_assignment=frozenset((str(t), int(p)) for t, p in target))
                       for member_id, client_id, host, assigned, target in row["members"])
            groups.append(DescribedGroup(
                group_id=str(row["id"]),
                state=row["state"] if row["state"] in _CLIENT_STATES else "Unknown",
                type=row["type"] if row["type"] in ("classic", "consumer") else "unknown",
                assignor=str(row["assignor"]),
                members=tuple(sorted(members, key=lambda member: member.member_id))))
            committed[str(row["id"])] = {(str(t), int(p)): int(offset) for t, p, offset in row["committed"]}
        return GroupReads(groups=tuple(groups), committed=committed, others=tuple(str(g) for g in answer["others"]))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"the Java helper's group reads did not parse: {error}: {text[:200]!r}") from None


def parse_group_ids(text: str) -> set[str]:
    """``gapwatch.GroupReads.readers``' answer ("length:id" after one another,
    the length in characters: a group id may hold any character) as a set.
    Raises ValueError unless all of the text parses."""
    ids, at = set(), 0
    while at < len(text):
        colon = text.find(":", at)
        if colon <= at or not text[at:colon].isdigit():
            raise ValueError(f"the Java helper's group ids did not parse at {at}: {text[at:at + 50]!r}")
        end = colon + 1 + int(text[at:colon])
        if end > len(text):
            raise ValueError(f"the Java helper's group ids end early: {text[at:at + 50]!r}")
        ids.add(text[colon + 1:end])
        at = end
    return ids


def parse_partition_counts(text: str) -> dict[str, int]:
    """``gapwatch.TopicCounts``' lines ("name count") as {name: count}."""
    counts = {}
    for line in text.splitlines():
        name, _, count = line.rpartition(" ")
        counts[name] = int(count)
    return counts


def parse_topic_listings(text: str) -> dict[str, tuple[str, bool]]:
    """``[(name=a, topicId=…, internal=false), …]`` as {name: (topic id, internal)}.
    Raises ValueError unless every listing in the text parses.

    Java prints a topic id in URL-safe base64 ("-", "_"), librdkafka (and so
    every id Gapwatch stored) in standard base64 ("+", "/"): the id is given
    in librdkafka's spelling, or one topic in 32 would read as recreated."""
    found = {name: (topic_id.replace("-", "+").replace("_", "/"), internal == "true")
             for name, topic_id, internal in _TOPIC_LISTING.findall(text)}
    if text.count("(name=") != len(found) or not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"the Java client's topic listing did not parse: {text[:200]!r}")
    return found
