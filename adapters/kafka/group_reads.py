"""The groups a poll reads, and which client reads them: classic and
consumer groups listed and described by librdkafka, their commits batched
through Kafka's Java client where it runs here (librdkafka otherwise, and for
whatever the Java client could not read); share and streams groups only
through the Java client. A cluster that does not serve a kind is asked again
after SHARE_UNSUPPORTED_RECHECK_SECONDS."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition

from groups.domain.snapshot import GroupSnapshot
from adapters.kafka.client import WAIT_GRACE_SECONDS, DescribedGroup, KafkaClient, chunks, group_from
from adapters.kafka.errors import COORDINATOR_BUSY, KafkaUnavailable, describe_error, error_code
from adapters.kafka.java_client import JVM_START_STAGE, GroupKindUnsupported
from adapters.kafka.java_admin import JavaAdmin

log = logging.getLogger(__name__)
SHARE_UNSUPPORTED_RECHECK_SECONDS = 600.0
GROUPS_PER_DESCRIBE = 100
COORDINATOR_RETRY_SECONDS = 0.25


class GroupReads(KafkaClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Share and streams groups: Kafka's Java client, made at their first read.
        self._java_reader: JavaAdmin | None = None
        # Kind -> when to ask again a cluster that did not serve it (monotonic seconds).
        self._unsupported_until: dict[str, float] = {}

    @property
    def _java(self) -> JavaAdmin:
        """Kafka's Java client for this cluster (one JVM per process, started at first use)."""
        if self._java_reader is None:
            self._java_reader = JavaAdmin(self._config, timeout=self._timeout)
        return self._java_reader

    def close(self) -> None:
        """Also close Kafka's Java client, if one was made: its network thread
        and connections last until it is closed, not until it is dropped. Only
        for a client nobody is using (``tasks.polling.cluster_adapter``): its
        requests in flight are not waited out (1 ms, not 0: Java's
        ``Admin.close`` joins its thread for that long, and ``join(0)`` waits
        without a bound)."""
        reader, self._java_reader = self._java_reader, None
        if reader is not None:
            reader.close(grace=0.001)
        super().close()

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
        """``JavaAdmin.read_groups``, or None: no groups, no JVM or
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
