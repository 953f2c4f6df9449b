"""The poll's face of the adapter: one complete, consistent snapshot of a
cluster (topics, watermarks, groups, committed offsets) as plain data
(``groups.domain.snapshot``).

``snapshot`` keeps its five steps here, in the order that makes its bounds
sound (watermarks before groups), with their error rules; what the steps
call has a module of its own: the ListOffsets calls and their retries
(``list_offsets``), the groups and which client reads them
(``group_reads``), a split poll's parts (``part_reads``), and the watcher's
reads (``watch_reads``).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime, timezone

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation

from groups.domain.snapshot import GroupSnapshot, PartitionOffsets, Snapshot, TopicSnapshot
from adapters.kafka.client import WAIT_GRACE_SECONDS, DescribedGroup, TopicDetails, chunks, topic_details
from adapters.kafka.errors import REFUSALS, TOPIC_GONE, describe_error, error_code, missing_acl
from adapters.kafka.list_offsets import partitions_of
from adapters.kafka.part_reads import PartReads
from adapters.kafka.parts import PollParts
from adapters.kafka.java_admin import JavaAdmin
from adapters.kafka.watch_reads import WatchReads

TOPICS_PER_DESCRIBE = 500


class SnapshotReads(WatchReads, PartReads):
    """After ``snapshot`` returns, ``last_timings`` holds the seconds each
    stage took (topics, watermarks, groups, offsets) and
    ``last_peak_in_flight`` the most calls a stage had outstanding at once."""

    def snapshot(
        self, *, cluster: str, now: datetime, log_starts_for: Collection[str] = (),
        known_counts: Mapping[str, int] | None = None,
        topics: Collection[str] | None = None, groups: Collection[str] | None = None,
        share_groups: Collection[str] | None = None, streams_groups: Collection[str] | None = None,
        java: bool = True, parts: PollParts | None = None, part_count: int = 1,
        every_share_and_streams_group: bool = False, stable_everywhere: bool = False,
    ) -> Snapshot:
        """Read everything one poll needs, in this order:

        1. topics: names from metadata, then topic ids and partitions;
        2. watermarks: the high watermark of every partition, and the last
           stable offset (read committed) of the partitions whose log starts
           step 5 reads by topic (a finding's H_k is observed there; L_k
           beside it must be read before the groups too), of every partition
           with ``stable_everywhere`` on a full snapshot (the topics' floors,
           ``detection.first_start_evidence``, sampled once a minute);
        3. groups: list, then describe (state, type, members, assignments);
        4. offsets: the committed offsets of every group;
        4b. share and streams groups (``adapters.kafka.java_admin``, Kafka's
           Java client): every one the cluster lists when ``groups`` is None,
           else the ``share_groups`` and ``streams_groups`` named; share
           groups with their members, start offsets and
           ``share.auto.offset.reset``, streams groups with their members'
           active tasks as partitions and their committed offsets. ``()``
           reads none; ``every_share_and_streams_group`` reads every one
           listed though ``groups`` names some. A cluster that does not serve
           a kind has none of it;
        5. log starts, only where a poll needs them when ``known_counts``
           (stored partition count per topic) is given: every partition of
           the topics in ``log_starts_for`` (the caller names topics with open
           findings) or whose partition count differs from the known one (new
           partitions open findings), of topics not stored yet (a topic first
           seen already read opens findings), and every partition a group reads
           without a commit (its lag is H - E). Elsewhere ``log_start`` is
           None: reading all 10k log starts every poll was a third of the
           poll's cost (issue 11). Without ``known_counts``, all are read.

        ``java`` False: no Kafka Java client (no JVM) for topic ids either;
        every topic is then described (``_read_topics``).

        ``parts`` (a full snapshot of a big cluster): steps 2, and 3 with 4,
        are cut into ``part_count`` parts (``adapters.kafka.parts``) that
        ``parts`` runs, on several workers (``tasks.poll_parts``); the groups'
        parts start only once every watermark part has answered, so the order
        below holds across workers. Listing the groups, share and streams
        groups and log starts stay here. The snapshot is the same as unsplit.

        ``topics`` makes it a targeted snapshot (the watcher's): only those
        topics (all their partitions' log starts are read), with ``scope`` set
        so nothing outside is read as gone; ``groups`` names the groups to read
        (default: every group the cluster lists).

        Watermarks are read before groups on purpose: when steps 3 and 4 see
        no owner and no commit on a partition, a group that picks it up later
        starts at or above the high watermark read in step 2, so that value
        safely bounds what was written before the group could read it (H_k in
        DESIGN section 3).

        Any error raises ``KafkaUnavailable``; a partial answer is an error,
        never a smaller cluster. Only what is confirmed gone is skipped: a
        topic deleted during the poll (confirmed by describing it again), and
        a group that is Dead or not found when described or when its offsets
        are fetched.

        The broker leaves what the principal may not Describe out of its
        listings instead of refusing. So a full snapshot first checks Describe
        on the cluster (without it, groups are listed only where the principal
        may Describe them), describes by name the topics of ``known_counts``
        that the listing leaves out and the topics group members are assigned
        but the listing leaves out: a refusal there raises ``AccessRefused``
        naming the missing ACL, and nothing is read as deleted.
        """
        self.last_timings, self.last_cpu = {}, {}
        self.last_peak_in_flight = {}
        with self._stage("topics"):
            if topics is None:
                self._check_cluster_describe()
            described = self._read_topics(None if topics is None else sorted(topics), known=known_counts or {},
                                          java=java)
        with self._stage("watermarks"):
            deadline = time.monotonic() + self._timeout
            gone: set[str] = set()
            split = parts if topics is None and part_count > 1 else None
            if split is None:
                high_watermarks = self._list_offsets(described, partitions_of(described), OFFSET_END, gone, deadline)
            else:
                high_watermarks = self._split_watermarks(split, part_count, described, gone)
            wanted = set(log_starts_for) | {
                name for name, topic in described.items()
                if known_counts is None or topics is not None
                or name not in known_counts or known_counts[name] != len(topic.partition_ids)
            }
            stable_keys = [key for key in partitions_of(described)
                           if key[0] in wanted or (stable_everywhere and topics is None)]
            stable_offsets = self._list_offsets(
                described, stable_keys, OFFSET_END, gone, time.monotonic() + self._timeout,
                reader=self.stable_offsets_reader,
            ) if stable_keys else {}
        groups_from = datetime.now(timezone.utc)
        # A targeted snapshot (the watcher's) asks only for its topics' partitions' commits:
        # the groups' commits elsewhere are not its business.
        scoped = None if topics is None else partitions_of(described)
        with self._stage("groups"):
            group_ids = self._list_group_ids() if groups is None else sorted(groups)
            if split is not None:
                found, committed = self._split_groups(split, part_count, group_ids, java=java)
            else:
                found, committed = self._describe_groups_first(group_ids, scoped, java=java)
            if topics is None:
                self._check_assigned_topics(described, found)
        with self._stage("offsets"):
            if split is None:
                self._read_commits_left(found, committed, scoped)
        every_java = groups is None or every_share_and_streams_group
        with self._stage("share_groups"):
            shares = self._read_java_groups("share", None if every_java and share_groups is None
                                            else sorted(share_groups or ()))
        with self._stage("streams_groups"):
            streams = self._read_java_groups("streams", None if every_java and streams_groups is None
                                             else sorted(streams_groups or ()))
        java_read = shares + streams
        # confluent-kafka lists classic and consumer groups only; should a client list more, the
        # Java client's reading of a share or streams group is the one that knows its kind.
        java_ids = {group.group_id for group in java_read}
        found = [group for group in found if group.group_id not in java_ids]
        readers = [*found, *java_read]
        committed.update((group.group_id, group.committed) for group in java_read)
        with self._stage("log_starts"):
            needed = [key for key in partitions_of(described) if key[0] in wanted]
            needed += _uncommitted(described, readers, committed, wanted)
            log_starts = self._list_offsets(
                described, sorted(set(needed)), OFFSET_BEGINNING, gone, time.monotonic() + self._timeout
            )
        return Snapshot(
            cluster=cluster,
            taken_at=now,
            topics=_topic_snapshots(described, gone, high_watermarks, log_starts, stable_offsets),
            scope=None if topics is None else frozenset(topics),
            groups_from=groups_from,
            observed_until=datetime.now(timezone.utc),
            groups=tuple(sorted(
                [
                    GroupSnapshot(
                        group_id=group.group_id,
                        state=group.state,
                        type=group.type,
                        assignor=group.assignor,
                        members=group.members,
                        committed=committed[group.group_id],
                    )
                    for group in found
                    if group.group_id in committed
                ] + java_read,
                key=lambda group: group.group_id,
            )),
        )


    # -- 1. topics ---------------------------------------------------------

    def _check_cluster_describe(self) -> None:
        """Without Describe on the cluster the broker lists only the groups the
        principal may Describe: a group without that ACL would be left out,
        silently. With it, every group is listed, and one the principal may not
        Describe is refused in words when described."""
        try:
            answer = self.admin.describe_cluster(include_authorized_operations=True, request_timeout=self._timeout)
            operations = answer.result(timeout=self._timeout + WAIT_GRACE_SECONDS).authorized_operations
        except Exception as error:  # noqa: BLE001 - a failed or missing answer, whatever its type
            raise self._unavailable("topics", f"describe cluster: {describe_error(error)}", cause=error) from None
        if AclOperation.DESCRIBE not in (operations or ()) and AclOperation.ALL not in (operations or ()):
            raise self._unavailable("topics", f"{missing_acl('Describe', 'cluster')}: without it the broker lists "
                                              "only the consumer groups Gapwatch may Describe and leaves the others "
                                              "out silently", refused=True)

    def _read_topics(
        self, names: list[str] | None = None, *, known: Collection[str] = (), why: Mapping[str, str] | None = None,
        java: bool = False,
    ) -> dict[str, TopicDetails]:
        """Describe ``names``; by default every listed topic, and every one of
        ``known`` the listing leaves out. ``why`` says why a name is asked
        for, for the error when describing it is refused.

        By default, a listed topic's partitions come from the metadata and its
        id from Kafka's Java client's topic listing: describing every topic
        (for the id, which changes only when a topic is recreated) cost a
        second of CPU a poll at 60k partitions, the listing tens of
        milliseconds. Only topics the Java listing lacks (created meanwhile)
        or whose metadata has an error are described; all are without a JVM."""
        why = dict(why or {})
        kept: dict[str, TopicDetails] = {}
        if names is None:
            try:
                listed = self.admin.list_topics(timeout=self._timeout).topics
            except KafkaException as error:
                raise self._unavailable("topics", f"metadata: {describe_error(error)}", cause=error) from None
            unlisted = sorted(set(known) - set(listed))
            why.update({name: "seen by earlier polls, no longer listed (not read as deleted)" for name in unlisted})
            ids = self._from_java("topic ids", JavaAdmin.topic_ids) if java else None
            kept = {} if ids is None else {
                name: TopicDetails(
                    name=name, topic_id=ids[name][0], is_internal=ids[name][1],
                    partition_ids=tuple(sorted(topic.partitions)),
                    replication_factor=max((len(p.replicas) for p in topic.partitions.values()), default=1),
                )
                for name, topic in listed.items() if topic.error is None and name in ids
            }
            names = sorted({*listed, *unlisted} - set(kept))
        described: dict[str, TopicDetails] = {}

        def handle(name: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if error_code(error) in TOPIC_GONE:
                    return  # deleted since list_topics
                reason = f" ({why[name]})" if name in why and error_code(error) in REFUSALS else ""
                raise self._unavailable("topics", f"describe topic {name!r}{reason}: {describe_error(error, topic=name)}",
                                        cause=error)
            description = future.result()
            described[name] = topic_details(name, description)

        self._gather(
            "topics",
            (
                lambda batch=batch: self.admin.describe_topics(
                    TopicCollection(list(batch)), request_timeout=self._timeout
                )
                for batch in chunks(names, TOPICS_PER_DESCRIBE)
            ),
            handle,
        )
        return {**kept, **described}


    # -- 3. groups: the topics their members are assigned -------------------

    def _check_assigned_topics(self, described: dict[str, TopicDetails], groups: Sequence[DescribedGroup]) -> None:
        """Topics that members of a group are assigned but the listing left
        out: deleted meanwhile, or hidden because the principal may not
        Describe them (then the group's committed offsets on them are left
        out too). Described by name: a refusal raises, naming the ACL."""
        hidden: dict[str, str] = {}
        for group in groups:
            for member in group.members:
                for topic, _ in member.assignment:
                    if topic not in described:
                        hidden.setdefault(topic, group.group_id)
        if hidden:
            self._read_topics(sorted(hidden), why={
                topic: f"consumer group {group_id!r} reads it, the topic listing leaves it out"
                for topic, group_id in hidden.items()})









def _uncommitted(
    described: dict[str, TopicDetails], groups: Sequence[DescribedGroup | GroupSnapshot],
    committed: dict[str, dict[tuple[str, int], int]], skip: set[str],
) -> list[tuple[str, int]]:
    """Partitions of topics a group reads (commits on or is assigned) where it has no commit."""
    needed: set[tuple[str, int]] = set()
    for group in groups:
        offsets = committed.get(group.group_id, {})
        names = {topic for topic, _ in offsets} | {t for m in group.members for t, _ in m.assignment}
        for name in names - skip:
            if name in described:
                needed.update((name, p) for p in described[name].partition_ids if (name, p) not in offsets)
    return sorted(needed)


def _topic_snapshots(
    described: dict[str, TopicDetails], gone: set[str], high_watermarks: dict[tuple[str, int], int],
    log_starts: dict[tuple[str, int], int], stable_offsets: dict[tuple[str, int], int],
) -> tuple[TopicSnapshot, ...]:
    """Read after the high watermark, a log start can only be above it if retention
    ran in between, and a last stable offset if records were written in between:
    both clamped, so ``log_start <= high_watermark`` and ``last_stable_offset <=
    high_watermark`` always hold (the lower LSO still bounds a later start)."""
    return tuple(
        TopicSnapshot(
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=topic.is_internal,
            partitions=tuple(
                PartitionOffsets(
                    partition=partition,
                    log_start=(
                        None if (topic.name, partition) not in log_starts
                        else min(log_starts[(topic.name, partition)], high_watermarks[(topic.name, partition)])
                    ),
                    high_watermark=high_watermarks[(topic.name, partition)],
                    last_stable_offset=(
                        None if (topic.name, partition) not in stable_offsets
                        else min(stable_offsets[(topic.name, partition)], high_watermarks[(topic.name, partition)])
                    ),
                )
                for partition in topic.partition_ids
            ),
        )
        for topic in sorted(described.values(), key=lambda topic: topic.name)
        if topic.name not in gone
    )
