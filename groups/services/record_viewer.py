"""The record viewer: an approver looks at the first and last records of a
finding's missed range before choosing a repair. The records are read on
demand by a worker with the cluster's credentials (``gapwatch.read_records``),
shown once, and never stored: not in the database, not in the audit row
(which says who looked at which offsets), not in a log; the worker's answer
is encrypted with a key only this request holds, and deleted once read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cryptography.fernet import Fernet
from django.core.exceptions import ValidationError
from django.db import transaction

from groups.domain.record_display import MAX_RECORDS_PER_END
from groups.models import Finding
from groups.services.access import approver_require, scope_require_act
from groups.services.audit import audit_record
from groups.services.dispatch import READ_RECORDS, task_answer
from groups.services.lifecycle import missed_range_of

# How long a page waits for the worker's read (its Kafka requests time out sooner).
RECORDS_WAIT_SECONDS = 30.0


class RecordsUnreadable(Exception):
    """The worker could not read the records (the cluster away, a refused
    login); the message is the worker's, secrets redacted."""


@dataclass(frozen=True)
class RecordsRange:
    """The offsets the viewer reads: the finding's missed range, half-open,
    from its start to the sound end (the first commit), or to the high
    watermark while there is none."""

    topic: str
    partition: int
    start: int
    end: int


def finding_records_range(*, finding: Finding) -> RecordsRange:
    missed = missed_range_of(finding)
    end = missed.bound_end if missed.bound_end is not None else missed.high_watermark
    return RecordsRange(topic=missed.topic, partition=missed.partition, start=missed.start, end=max(end, missed.start))


def finding_records_read(*, user, finding_id: int, count: object) -> tuple[RecordsRange, list[dict]]:
    """The first and last ``count`` records of the finding's missed range.

    1. Only approvers; ``count`` a whole number from 1 to MAX_RECORDS_PER_END.
    2. Audit who looked at which offsets (never what they saw), committed
       before the read: a look that fails is audited too.
    3. Ask a worker with a one-time key; decrypt its answer; a Kafka error
       comes back as RecordsUnreadable with the worker's (redacted) words.
    Raises Finding.DoesNotExist, PermissionDenied, ValidationError,
    RecordsUnreadable, and QueueUnavailable or TaskTimedOut from dispatch.
    """
    approver_require(user, doing="reading records")
    text = str(count).strip() if isinstance(count, (int, str)) and not isinstance(count, bool) else ""
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_RECORDS_PER_END):
        raise ValidationError(f"count is a whole number from 1 to {MAX_RECORDS_PER_END}, got {count!r}")
    count = int(text)
    finding = Finding.objects.select_related("cluster", "topic", "group").get(id=finding_id)
    scope_require_act(user, [finding])
    where = finding_records_range(finding=finding)
    with transaction.atomic():
        audit_record(action="finding.records_viewed", actor=user, cluster=finding.cluster, object_type="finding",
                     object_id=finding.id, detail={"topic": where.topic, "partition": where.partition,
                                                   "range": [where.start, where.end], "first_and_last": count})
    key = Fernet.generate_key()
    sealed = task_answer(name=READ_RECORDS, timeout=RECORDS_WAIT_SECONDS, args=(
        finding.cluster_id, where.topic, where.partition, where.start, where.end, count, key.decode()))
    answer = json.loads(Fernet(key).decrypt(str(sealed).encode()))
    if "error" in answer:
        raise RecordsUnreadable(f"the records could not be read: {answer['error']}")
    return where, answer["records"]
