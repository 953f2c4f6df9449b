"""The poll's face of the adapter: one complete, consistent snapshot of a
cluster (topics, watermarks, groups, committed offsets) as plain data
(``groups.domain.snapshot``).

Over 400 lines on purpose: the five steps of ``snapshot`` read in the order
that makes its bounds sound (watermarks before groups), with their error
rules; split apart, that order would be a convention between modules.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AclOperation

from groups.domain.snapshot import GroupSnapshot, PartitionOffsets, Snapshot, TopicSnapshot
from tasks.kafka.client import (
    WAIT_GRACE_SECONDS,
    DescribedGroup,
    KafkaClient,
    TopicDetails,
    chunks,
    group_from,
    topic_details,
)
from tasks.kafka.parts import (
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
from tasks.kafka.java_client import JVM_START_STAGE, GroupKindUnsupported
from tasks.kafka.share_groups import ShareGroupReader
from tasks.kafka.errors import (
    COORDINATOR_BUSY,
    PARTITION_TROUBLE,
    KafkaUnavailable,
    REFUSALS,
    TOPIC_GONE,
    describe_error,
    error_code,
    missing_acl,
)

log = logging.getLogger(__name__)
TOPICS_PER_DESCRIBE = 500
SHARE_UNSUPPORTED_RECHECK_SECONDS = 600.0
GROUPS_PER_DESCRIBE = 100
# librdkafka's ListOffsets costs grow with the square of the partitions in one
# call (10k: 0.5 s of CPU, 1k: 0.017 s, 500: 0.005 s): calls of at most this
# many, LIST_OFFSETS_THREADS at once (the client releases the GIL while it waits).
PARTITIONS_PER_LIST_OFFSETS = 500
LIST_OFFSETS_THREADS = 8
_FIRST_RETRY_SECONDS = 0.05
COORDINATOR_RETRY_SECONDS = 0.25


class SnapshotReads(KafkaClient):
    """After ``snapshot`` returns, ``last_timings`` holds the seconds each
    stage took (topics, watermarks, groups, offsets) and
    ``last_peak_in_flight`` the most calls a stage had outstanding at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Share and streams groups: Kafka's Java client, made at their first read.
        self._java_reader: ShareGroupReader | None = None
        # Kind -> when to ask again a cluster that did not serve it (monotonic seconds).
        self._unsupported_until: dict[str, float] = {}

    def partition_counts(self, *, java: bool = True) -> dict[str, int]:
        """Partition count of every topic, from one metadata request: what the
        watcher compares every second to see partitions added. Through the
        Java helper when ``java`` and it is installed (one line per topic; 60k
        partitions as librdkafka's Python objects cost 0.2 s of CPU a tick),
        else through librdkafka."""
        counts = self._from_java("partition counts", ShareGroupReader.partition_counts) if java else None
        if counts is not None:
            return counts
        try:
            metadata = self.admin.list_topics(timeout=self._timeout)
        except KafkaException as error:
            raise self._unavailable("topics", f"metadata: {describe_error(error)}", cause=error) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    def topic_readers(self, counts: Mapping[str, int], *, java: bool = True) -> set[str] | None:
        """The classic and consumer groups that read any of the topics in
        ``counts`` (name -> partition count), asked of every group the
        poll's own listing finds, through the Java helper
        (``ShareGroupReader.topic_readers``); None without it (or ``java``
        False): the caller then reads every group. A failed listing raises
        ``KafkaUnavailable``; it is asked only once the JVM runs."""
        if not java:
            return None
        return self._from_java("topic readers", lambda reader: reader.topic_readers(self._list_group_ids(), counts))

    def snapshot(
        self, *, cluster: str, now: datetime, log_starts_for: Collection[str] = (),
        known_counts: Mapping[str, int] | None = None,
        topics: Collection[str] | None = None, groups: Collection[str] | None = None,
        share_groups: Collection[str] | None = None, streams_groups: Collection[str] | None = None,
        java: bool = True, parts: PollParts | None = None, part_count: int = 1,
        every_share_and_streams_group: bool = False,
    ) -> Snapshot:
        """Read everything one poll needs, in this order:

        1. topics: names from metadata, then topic ids and partitions;
        2. watermarks: the high watermark of every partition, and the last
           stable offset (read committed) of the partitions whose log starts
           step 5 reads by topic (a finding's H_k is observed there; L_k
           beside it must be read before the groups too);
        3. groups: list, then describe (state, type, members, assignments);
        4. offsets: the committed offsets of every group;
        4b. share and streams groups (``tasks.kafka.share_groups``, Kafka's
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
           partitions open findings), and every partition a group reads
           without a commit (its lag is H - E). Elsewhere ``log_start`` is
           None: reading all 10k log starts every poll was a third of the
           poll's cost (issue 11). Without ``known_counts``, all are read.

        ``java`` False: no Kafka Java client (no JVM) for topic ids either;
        every topic is then described (``_read_topics``).

        ``parts`` (a full snapshot of a big cluster): steps 2, and 3 with 4,
        are cut into ``part_count`` parts (``tasks.kafka.parts``) that
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
                high_watermarks = self._list_offsets(described, _partitions(described), OFFSET_END, gone, deadline)
            else:
                high_watermarks = self._split_watermarks(split, part_count, described, gone)
            wanted = set(log_starts_for) | {
                name for name, topic in described.items()
                if known_counts is None or topics is not None
                or (name in known_counts and known_counts[name] != len(topic.partition_ids))
            }
            stable_keys = [key for key in _partitions(described) if key[0] in wanted]
            stable_offsets = self._list_offsets(
                described, stable_keys, OFFSET_END, gone, time.monotonic() + self._timeout,
                reader=self.stable_offsets_reader,
            ) if stable_keys else {}
        groups_from = datetime.now(timezone.utc)
        # A targeted snapshot (the watcher's) asks only for its topics' partitions' commits:
        # the groups' commits elsewhere are not its business.
        scoped = None if topics is None else _partitions(described)
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
            needed = [key for key in _partitions(described) if key[0] in wanted]
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

    # -- 2 and 3-4 in parts (a split poll) ---------------------------------

    def read_watermarks_part(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One part of step 2, on whichever worker runs it: the high
        watermarks of the payload's topics, and which of them are gone."""
        described = topics_in(payload["topics"])
        gone: set[str] = set()
        offsets = self._list_offsets(described, _partitions(described), OFFSET_END, gone,
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
            ids = self._from_java("topic ids", ShareGroupReader.topic_ids) if java else None
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

    @property
    def _java(self) -> ShareGroupReader:
        """Kafka's Java client for this cluster (one JVM per process, started at first use)."""
        if self._java_reader is None:
            self._java_reader = ShareGroupReader(self._config, timeout=self._timeout)
        return self._java_reader

    def _from_java(self, what: str, read):
        """``read(self._java)``, or None where it cannot answer here: no JVM
        starts, the Java helper is not installed (``read`` answers None), or
        its answer does not parse. The caller then asks librdkafka. A cluster's
        refusal or failure is raised like any other."""
        try:
            return read(self._java)
        except ValueError as error:  # a Java client that prints its answer otherwise
            log.warning("%s: asking librdkafka instead: %s", what, error)
        except KafkaUnavailable as error:
            if error.stage != JVM_START_STAGE:
                raise
            log.warning("%s: asking librdkafka instead: %s", what, error)
        return None

    # -- 2. watermarks -----------------------------------------------------

    def _list_offsets(
        self,
        described: dict[str, TopicDetails],
        partitions: Sequence[tuple[str, int]],
        spec: int,
        gone: set[str],
        deadline: float,
        *,
        reader: Any = None,
    ) -> dict[tuple[str, int], int]:
        """``spec`` OFFSET_END (-1): high watermarks (last stable offsets with
        ``reader`` the ``stable_offsets_reader``); OFFSET_BEGINNING (-2): log starts.

        1. ListOffsets calls of ``PARTITIONS_PER_LIST_OFFSETS`` partitions,
           ``LIST_OFFSETS_THREADS`` at once, through the offsets reader (the
           client sends one request per partition leader).
        2. Partitions that answered with a ``PARTITION_TROUBLE`` error:
           describe their topics again; topics found gone join ``gone``.
        3. Ask again for the rest, with backoff, until ``deadline``; then
           the trouble is an error."""
        offsets: dict[tuple[str, int], int] = {}
        backoff = _FIRST_RETRY_SECONDS
        partitions = [key for key in partitions if key[0] not in gone]
        reader = reader or self.offsets_reader

        def ask(batch: Sequence[tuple[str, int]]) -> list[TopicPartition | _Answer]:
            """The answer, or the call's error on every partition of the batch:
            the client fails the whole call when one partition is unknown (a
            topic deleted since it was described), so the batch is troubled."""
            try:
                return reader.offsets_for_times(
                    [TopicPartition(topic, partition, spec) for topic, partition in batch], timeout=self._timeout)
            except KafkaException as error:
                if error_code(error) not in PARTITION_TROUBLE:
                    raise
                return [_Answer(topic, partition, error.args[0]) for topic, partition in batch]

        while partitions:
            troubled: dict[tuple[str, int], BaseException] = {}
            batches = list(chunks(partitions, PARTITIONS_PER_LIST_OFFSETS))
            try:
                with ThreadPoolExecutor(min(LIST_OFFSETS_THREADS, len(batches))) as pool:
                    answers = [answer for batch in pool.map(ask, batches) for answer in batch]
            except KafkaException as error:
                raise self._unavailable("watermarks", f"list offsets: {describe_error(error)}", cause=error) from None
            self.last_peak_in_flight["watermarks"] = max(min(LIST_OFFSETS_THREADS, len(batches)),
                                                         self.last_peak_in_flight.get("watermarks", 0))
            for answer in answers:
                key = (answer.topic, answer.partition)
                if answer.error is None:
                    offsets[key] = answer.offset
                elif error_code(answer.error) in PARTITION_TROUBLE:
                    troubled[key] = answer.error
                else:
                    raise self._unavailable(
                        "watermarks",
                        f"list offsets of {answer.topic!r} [{answer.partition}]: "
                        f"{describe_error(answer.error, topic=answer.topic)}",
                        cause=KafkaException(answer.error),
                    )
            if troubled:
                gone |= self._topics_gone(described, {topic for topic, _ in troubled})
                troubled = {key: error for key, error in troubled.items() if key[0] not in gone}
                self._refresh_reader_metadata(reader, {topic for topic, _ in troubled})
            if troubled and time.monotonic() + backoff > deadline:
                (topic, partition), error = min(troubled.items())
                raise self._unavailable(
                    "watermarks",
                    f"list offsets of {topic!r} [{partition}]: {describe_error(error)}; "
                    f"{len(troubled)} partition(s) still without an answer after {self._timeout:g}s",
                )
            if troubled:
                time.sleep(backoff)
                backoff *= 2
            partitions = sorted(troubled)
        return offsets

    def _refresh_reader_metadata(self, reader, names: set[str]) -> None:
        """The offsets reader keeps its own metadata and does not refresh it for
        a partition it does not know (one added since): asking for the topics'
        metadata does. Its failure is left to the next attempt to report."""
        for name in sorted(names):
            try:
                reader.list_topics(topic=name, timeout=self._timeout)
            except KafkaException:
                return

    def _topics_gone(self, described: dict[str, TopicDetails], names: set[str]) -> set[str]:
        """Which of ``names`` are deleted, or recreated under another topic id."""
        gone: set[str] = set()

        def handle(name: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if error_code(error) in TOPIC_GONE:
                    gone.add(name)
                    return
                raise self._unavailable("watermarks", f"describe topic {name!r}: {describe_error(error, topic=name)}",
                                        cause=error)
            if topic_details(name, future.result()).topic_id != described[name].topic_id:
                gone.add(name)

        self._gather(
            "watermarks",
            [lambda: self.admin.describe_topics(TopicCollection(sorted(names)), request_timeout=self._timeout)],
            handle,
        )
        return gone

    # -- 3. groups ---------------------------------------------------------

    def _list_group_ids(self) -> list[str]:
        """Every broker's classic and consumer (KIP-848) groups (the client
        does not report share and streams groups; step 4b reads those). A
        broker whose coordinator is still loading
        (``COORDINATOR_BUSY``) is asked again until the timeout, as Kafka's own
        admin client does; a group list missing one broker's groups is never
        returned."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                listing = self.admin.list_consumer_groups(request_timeout=self._timeout)
                result = listing.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
            except Exception as error:  # noqa: BLE001 - a failed or missing answer, whatever its type
                raise self._unavailable("groups", f"list groups: {describe_error(error)}", cause=error) from None
            busy = bool(result.errors) and all(error_code(error) in COORDINATOR_BUSY for error in result.errors)
            if not (busy and time.monotonic() + COORDINATOR_RETRY_SECONDS < deadline):
                break
            time.sleep(COORDINATOR_RETRY_SECONDS)
        if result.errors:
            raise self._unavailable(
                "groups", f"list groups: {'; '.join(describe_error(error) for error in result.errors)}"
            )
        # The client cannot describe or fetch offsets of the empty group id.
        return sorted({entry.group_id for entry in result.valid or [] if entry.group_id})

    def _describe_groups_first(
        self, group_ids: list[str], partitions: Sequence[tuple[str, int]] | None, *, java: bool,
    ) -> tuple[list[DescribedGroup], dict[str, dict[tuple[str, int], int]]]:
        """Step 3, and step 4 where Kafka's Java client runs here (``java``):
        it describes every group, then reads all their commits (on
        ``partitions`` only, when given), batched per coordinator. The groups
        it could not read, and all without it, librdkafka describes (and
        words their errors); ``_read_commits_left`` reads their commits."""
        read = self._java_group_reads(group_ids, partitions) if java else None
        if read is None:
            return self._describe_groups(group_ids), {}
        return [*read.groups, *self._describe_groups(list(read.others))], dict(read.committed)

    def _read_commits_left(self, found: Sequence[DescribedGroup], committed: dict[str, dict[tuple[str, int], int]],
                           partitions: Sequence[tuple[str, int]] | None) -> None:
        """Step 4 for the groups of ``found`` whose commits are not in ``committed`` yet, into it."""
        committed.update(self._read_committed(
            [group.group_id for group in found if group.group_id not in committed],
            None if partitions is None else [TopicPartition(name, partition) for name, partition in partitions],
        ))

    def _java_group_reads(self, group_ids: list[str], partitions: Sequence[tuple[str, int]] | None):
        """``ShareGroupReader.read_groups``, or None: no groups, no JVM or
        helper here, or any failure (librdkafka then reads them all again and
        says what failed in its words)."""
        if not group_ids:
            return None
        try:
            return self._from_java("groups", lambda reader: reader.read_groups(group_ids, partitions))
        except KafkaUnavailable as error:
            log.warning("groups: Kafka's Java client failed, librdkafka reads them: %s", error)
            return None

    def _describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        groups: list[DescribedGroup] = []

        def handle(group_id: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if error_code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                    return  # deleted since it was listed
                raise self._unavailable("groups", f"describe group {group_id!r}: {describe_error(error, group=group_id)}",
                                        cause=error)
            description = future.result()
            state = getattr(description, "state", ConsumerGroupState.UNKNOWN)
            if state == ConsumerGroupState.DEAD:
                return  # deleted (or expired) since it was listed
            groups.append(group_from(group_id, state, description))

        self._gather(
            "groups",
            (
                lambda batch=batch: self.admin.describe_consumer_groups(list(batch), request_timeout=self._timeout)
                for batch in chunks(group_ids, GROUPS_PER_DESCRIBE)
            ),
            handle,
        )
        return sorted(groups, key=lambda group: group.group_id)

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

    # -- 4b. share and streams groups --------------------------------------

    def _read_java_groups(self, kind: str, group_ids: list[str] | None) -> list[GroupSnapshot]:
        """Share or streams groups through Kafka's Java ``Admin`` (one JVM per
        process, started at the first call): all of them (None) or the named
        ones. A cluster that does not serve the kind is asked again only after
        SHARE_UNSUPPORTED_RECHECK_SECONDS (it may be upgraded meanwhile)."""
        if group_ids == [] or time.monotonic() < self._unsupported_until.get(kind, 0.0):
            return []
        reader = self._java
        try:
            if kind == "share":
                states = reader.read_all() if group_ids is None else reader.read(group_ids)
                return [state.as_group_snapshot() for state in states]
            return list(reader.read_streams(reader.list_streams_group_ids() if group_ids is None else group_ids))
        except GroupKindUnsupported:
            self._unsupported_until[kind] = time.monotonic() + SHARE_UNSUPPORTED_RECHECK_SECONDS
            return []

    # -- 4. committed offsets ---------------------------------------------

    def _read_committed(
        self, group_ids: Sequence[str], partitions: list[TopicPartition] | None = None,
    ) -> dict[str, dict[tuple[str, int], int]]:
        """Every committed offset of each group, or (``partitions``) only those.
        The client fetches one group per call (confluent-kafka-python
        #1947), so calls run concurrently, at most ``max_in_flight`` at once.
        An offset below zero (OFFSET_INVALID) means "no commit": left out."""
        committed: dict[str, dict[tuple[str, int], int]] = {}

        def handle(group_id: str, future: Future) -> None:
            error = future.exception()
            if error is not None:
                if error_code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                    return  # deleted since it was described
                raise self._unavailable(
                    "offsets", f"committed offsets of group {group_id!r}: {describe_error(error, group=group_id)}",
                    cause=error)
            found = self._committed_from(group_id, future.result())
            committed[group_id] = {key: offset for key, offset in found.items() if offset is not None}

        self._gather(
            "offsets",
            (
                lambda group_id=group_id: self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group_id, partitions)], request_timeout=self._timeout
                )
                for group_id in group_ids
            ),
            handle,
        )
        return committed


class _Answer:
    """A partition's answer standing for the failed call it was in."""

    def __init__(self, topic: str, partition: int, error: KafkaError) -> None:
        self.topic, self.partition, self.offset, self.error = topic, partition, -1, error


def _partitions(described: dict[str, TopicDetails]) -> list[tuple[str, int]]:
    return [(topic.name, partition) for topic in described.values() for partition in topic.partition_ids]


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
