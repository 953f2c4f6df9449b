"""The records' face of the adapter: the records at some offsets of one
partition, read for a person to look at (the record viewer) or counted per
isolation level (a finding's missed range: offsets are not records once
transactions put markers and aborted records in it). Raw bytes in, plain
data out; what is shown of them is ``groups.domain.record_display``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition

from adapters.kafka.client import KafkaClient

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True)
class RawRecord:
    offset: int
    timestamp_ms: int | None
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class RangeRecords:
    """How many records of ``[start, end)`` a reader of each isolation level
    reads: commit and abort markers take offsets and are never delivered,
    aborted records only to ``read_uncommitted``; compaction and retention
    leave holes too. ``read_committed`` is None while a transaction still
    open holds records of the range (the last stable offset is below ``end``)."""

    start: int
    end: int
    read_committed: int | None
    read_uncommitted: int


class RecordReads(KafkaClient):
    def count_records(self, *, topic: str, partition: int, start: int, end: int, deadline: float) -> RangeRecords:
        """Read ``[start, end)`` of one partition, read_uncommitted, and count
        it; read it again read_committed only when it holds fewer records
        than offsets (markers, aborted records or holes), and only once the
        last stable offset has passed ``end``. Raises ``KafkaUnavailable``
        past ``deadline``."""
        uncommitted = self._count(topic=topic, partition=partition, start=start, end=end,
                                  isolation="read_uncommitted", deadline=deadline)
        if uncommitted == end - start:
            return RangeRecords(start, end, uncommitted, uncommitted)
        reader = self.stable_offsets_reader
        try:
            [stable] = reader.offsets_for_times([TopicPartition(topic, partition, -1)], timeout=self._timeout)
        except KafkaException as error:
            raise self._unavailable("records", f"last stable offset of {topic!r} [{partition}]: {error}") from None
        if stable.error is not None or stable.offset < end:
            return RangeRecords(start, end, None, uncommitted)
        committed = self._count(topic=topic, partition=partition, start=start, end=end,
                                isolation="read_committed", deadline=deadline)
        return RangeRecords(start, end, committed, uncommitted)

    def _count(self, *, topic: str, partition: int, start: int, end: int, isolation: str, deadline: float) -> int:
        """Records a reader of ``isolation`` is delivered in ``[start, end)``:
        it stops at the first offset at or past ``end``, or at the end of
        what it may read (a partition EOF)."""
        consumer = Consumer({
            **self._config.librdkafka_options(),
            "group.id": f"gapwatch-record-count-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        })
        counted = 0
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while True:
                for message in consumer.consume(num_messages=10_000, timeout=0.5):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            return counted
                        raise self._unavailable("records", f"count {topic!r} [{partition}]: {error}")
                    if message.offset() >= end:
                        return counted
                    counted += 1
                    if message.offset() == end - 1:
                        return counted
                if time.monotonic() > deadline:
                    raise self._unavailable("records", f"counting {topic!r} [{partition}] [{start}, {end}) "
                                                       "took too long")
        except KafkaException as error:
            raise self._unavailable("records", f"count {topic!r} [{partition}]: {error}") from None
        finally:
            consumer.close()

    def first_record(self, *, topic: str, partition: int, start: int, deadline: float) -> RawRecord | None:
        """The first record at or after offset ``start`` still stored (one
        retention deleted, compaction removed or a transaction marker holds
        is skipped to the next one); None when there is none up to the end."""
        consumer = Consumer({
            **self._config.librdkafka_options(),
            "group.id": f"gapwatch-first-record-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        })
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return None
                    raise self._unavailable("records", f"read {topic!r} [{partition}]: {error}")
                kind, timestamp = message.timestamp()
                return RawRecord(offset=message.offset(), timestamp_ms=timestamp if kind in _TIMESTAMP_TYPES else None,
                                 timestamp_type=_TIMESTAMP_TYPES.get(kind, ""), key=None, value=None, headers=())
        except KafkaException as error:
            raise self._unavailable("records", f"read {topic!r} [{partition}]: {error}") from None
        finally:
            consumer.close()
        raise self._unavailable("records", f"reading the record at {start} of {topic!r} [{partition}] took too long")

    def read_records(self, *, topic: str, partition: int, ranges: Sequence[tuple[int, int]],
                     deadline: float) -> list[RawRecord]:
        """The records of each half-open ``[start, end)`` of one partition,
        by offset. Offsets retention deleted, compaction removed or that hold
        transaction markers are simply absent. The reader is assigned the
        partition directly: it joins no group and commits nothing."""
        consumer = Consumer({
            **self._config.librdkafka_options(),
            "group.id": f"gapwatch-record-viewer-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        })
        records: list[RawRecord] = []
        try:
            for start, end in ranges:
                consumer.assign([TopicPartition(topic, partition, start)])
                records += self._read_until(consumer, topic=topic, partition=partition, end=end, deadline=deadline)
        except KafkaException as error:
            raise self._unavailable("records", f"read {topic!r} [{partition}]: {error}") from None
        finally:
            consumer.close()
        return records

    def _read_until(self, consumer: Consumer, *, topic: str, partition: int, end: int,
                    deadline: float) -> list[RawRecord]:
        read: list[RawRecord] = []
        while True:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return read
                    raise self._unavailable("records", f"read {topic!r} [{partition}]: {error}")
                if message.offset() >= end:
                    return read
                kind, timestamp = message.timestamp()
                read.append(RawRecord(
                    offset=message.offset(), timestamp_ms=timestamp if kind in _TIMESTAMP_TYPES else None,
                    timestamp_type=_TIMESTAMP_TYPES.get(kind, ""), key=message.key(), value=message.value(),
                    headers=tuple(message.headers() or ()),
                ))
            if read and read[-1].offset >= end - 1:
                return read
            if time.monotonic() > deadline:
                raise self._unavailable("records", f"reading {topic!r} [{partition}] took too long")
