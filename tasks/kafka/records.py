"""The records' face of the adapter: the records at some offsets of one
partition, read for a person to look at (the record viewer). Raw bytes in,
plain data out; what is shown of them is ``groups.domain.records``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition

from tasks.kafka.client import KafkaClient

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True)
class RawRecord:
    offset: int
    timestamp_ms: int | None
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordReads(KafkaClient):
    def read_records(self, *, topic: str, partition: int, ranges: Sequence[tuple[int, int]],
                     deadline: float) -> list[RawRecord]:
        """The records of each half-open ``[start, end)`` of one partition,
        by offset. Offsets retention deleted, compaction removed or that hold
        transaction markers are simply absent. The reader is assigned the
        partition directly: it joins no group and commits nothing."""
        consumer = Consumer({
            **self._config.client_config(),
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
