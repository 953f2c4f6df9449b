"""ListOffsets for the poll, with its retries: high watermarks, last stable
offsets and log starts of many partitions at once, in calls of
PARTITIONS_PER_LIST_OFFSETS run LIST_OFFSETS_THREADS at a time; partitions in
trouble (a leader moving, a topic deleted or recreated) are described again
and asked again with backoff until the deadline."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition

from adapters.kafka.client import KafkaClient, TopicDetails, chunks, topic_details
from adapters.kafka.errors import PARTITION_TROUBLE, TOPIC_GONE, describe_error, error_code

# librdkafka's ListOffsets costs grow with the square of the partitions in one
# call (10k: 0.5 s of CPU, 1k: 0.017 s, 500: 0.005 s): calls of at most this
# many, LIST_OFFSETS_THREADS at once (the client releases the GIL while it waits).
PARTITIONS_PER_LIST_OFFSETS = 500
LIST_OFFSETS_THREADS = 8
_FIRST_RETRY_SECONDS = 0.05


class OffsetLists(KafkaClient):
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


class _Answer:
    """A partition's answer standing for the failed call it was in."""

    def __init__(self, topic: str, partition: int, error: KafkaError) -> None:
        self.topic, self.partition, self.offset, self.error = topic, partition, -1, error


def partitions_of(described: dict[str, TopicDetails]) -> list[tuple[str, int]]:
    return [(topic.name, partition) for topic in described.values() for partition in topic.partition_ids]
