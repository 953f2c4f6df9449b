"""What every face of the adapter shares: the lazy admin client, the
bounded fan-out of admin calls, one way to turn errors into
``KafkaUnavailable``, and the client's answers as plain data.

Creating a client opens no connection: the admin client is made on first use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaException
from confluent_kafka.admin import AclOperation, AdminClient

from groups.domain.cluster_config import ClusterConfig
from groups.domain.secrets import secret_redact
from groups.domain.snapshot import MemberSnapshot
from adapters.kafka.errors import LASTING_REFUSALS, REFUSALS, AccessRefused, KafkaUnavailable, describe_error, error_code

# librdkafka enforces request_timeout itself; this only guards against a
# future that is never completed, so no call can hang.
WAIT_GRACE_SECONDS = 5.0
# The group id the offsets reader is made with (a consumer must have one): it
# never joins, commits or fetches, so the group is never created or read.
OFFSETS_READER_GROUP = "gapwatch-offsets-reader"
# The broker's names for the states the client knows; KIP-848 states the
# client does not know ("Assigning", "Reconciling") arrive as UNKNOWN.
_STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}


@dataclass(frozen=True)
class TopicDetails:
    """One topic as the broker describes it now."""

    name: str
    topic_id: str
    is_internal: bool
    partition_ids: tuple[int, ...]
    replication_factor: int
    # Whether the principal may Read the topic (fetch its records, commit
    # offsets on it), when the broker was asked for its authorized operations.
    may_read: bool | None = None
    # Whether it may Write the topic (produce to it: a backfill's replay topic), likewise.
    may_write: bool | None = None

    @property
    def partitions(self) -> int:
        return len(self.partition_ids)


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    state: str
    type: str
    assignor: str
    members: tuple[MemberSnapshot, ...]


class _LastReported:
    """librdkafka's error callback: keeps the last error it reported. Not a
    bound method of the client: that would make a reference cycle (client ->
    admin -> callback -> client), so a dropped client's AdminClient lived on,
    reconnecting, until the cyclic collector destroyed it from whatever thread
    ran then, which librdkafka aborts the process for if it is one of its own."""

    def __init__(self) -> None:
        self.text, self.at, self.code = "", 0.0, None
        # A refused login is followed by "all brokers down": kept apart, so it is not hidden.
        self.refusal_text, self.refusal_at, self.refusal_code = "", 0.0, None

    def __call__(self, error) -> None:
        self.text, self.at, self.code = describe_error(error), time.monotonic(), error_code(error)
        if self.code in REFUSALS:
            self.refusal_text, self.refusal_at, self.refusal_code = self.text, self.at, self.code


class KafkaClient:
    """Every request carries ``timeout`` as its request timeout; at most
    ``max_in_flight`` admin calls are outstanding at once."""

    def __init__(self, config: ClusterConfig, *, timeout: float = 10.0, max_in_flight: int = 32) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._config = config
        self._timeout = timeout
        self._max_in_flight = max_in_flight
        self._admin: AdminClient | None = None
        # ListOffsets consumers by isolation.level (``offsets_reader``, ``stable_offsets_reader``).
        self._offsets_readers: dict[str, Consumer] = {}
        self.last_timings: dict[str, float] = {}
        self.last_cpu: dict[str, float] = {}
        self.last_peak_in_flight: dict[str, int] = {}
        # What librdkafka last reported on its own (a failed TLS handshake, a refused
        # SASL login): a request only fails with "transport failure" or a time-out.
        self._reported = _LastReported()

    def close(self) -> None:
        """Let go of the clients made so far: librdkafka's end when the last
        reference to them goes (a request after ``close`` makes new ones)."""
        self._admin, self._offsets_readers = None, {}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(
                {**self._config.librdkafka_options(), "socket.timeout.ms": int(self._timeout * 1000),
                 "error_cb": self._reported}
            )
        return self._admin

    @property
    def offsets_reader(self) -> Consumer:
        """A consumer for ListOffsets only (``offsets_for_times``): it answers a
        list, where the admin client makes a future per partition, a third of
        the CPU at 10k partitions. Read uncommitted: -1 answers the high
        watermark, as the admin client's OffsetSpec.latest() did."""
        return self._offsets_reader_for("read_uncommitted")

    @property
    def stable_offsets_reader(self) -> Consumer:
        """The same, read committed: -1 answers the last stable offset, where
        a read_committed member that starts at latest starts (below the high
        watermark while a transaction is open)."""
        return self._offsets_reader_for("read_committed")

    def _offsets_reader_for(self, isolation: str) -> Consumer:
        if isolation not in self._offsets_readers:
            self._offsets_readers[isolation] = Consumer(
                {**self._config.librdkafka_options(), "group.id": OFFSETS_READER_GROUP, "enable.auto.commit": False,
                 "isolation.level": isolation, "socket.timeout.ms": int(self._timeout * 1000),
                 "error_cb": self._reported}
            )
        return self._offsets_readers[isolation]

    def ping(self) -> int:
        """Ask the cluster for its metadata; return the number of brokers."""
        try:
            metadata = self.admin.list_topics(timeout=self._timeout)
        except KafkaException as error:
            raise self._unavailable("ping", describe_error(error), cause=error) from None
        if not metadata.brokers:
            raise self._unavailable("ping", "no brokers in metadata")
        return len(metadata.brokers)

    # -- plumbing ----------------------------------------------------------

    def _committed_from(self, group_id: str, answer: Any) -> dict[tuple[str, int], int | None]:
        """A ListConsumerGroupOffsets answer as ``{(topic, partition): offset}``,
        the offset being the next message to read, None without a commit
        (the client answers OFFSET_INVALID, below zero). An error on any
        partition raises."""
        found: dict[tuple[str, int], int | None] = {}
        for partition in answer.topic_partitions or []:
            if partition.error is not None:
                raise self._unavailable(
                    "offsets",
                    f"committed offset of group {group_id!r} on {partition.topic!r} [{partition.partition}]: "
                    f"{describe_error(partition.error, group=group_id, topic=partition.topic)}",
                    cause=partition.error,
                )
            found[(partition.topic, partition.partition)] = partition.offset if partition.offset >= 0 else None
        return found

    def _gather(
        self,
        stage: str,
        calls: Iterable[Callable[[], dict[Any, Future]]],
        handle: Callable[[Any, Future], None],
    ) -> None:
        """Run admin calls with at most ``max_in_flight`` outstanding and hand
        every answered future to ``handle`` as its call completes. The first
        error stops issuing further calls, so a dead cluster fails a stage in
        about one request timeout, not one per call."""
        in_flight: list[dict[Any, Future]] = []
        peak = 0

        def settle(until: int) -> None:
            nonlocal in_flight
            while len(in_flight) > until:
                # The futures of one call are answered together: waiting on one
                # unanswered future per call is enough, and waiting on all 10k of a
                # ListOffsets call's took a lock per future per wait.
                self._wait_any(stage, [_first_pending(call) for call in in_flight])
                still: list[dict[Any, Future]] = []
                for call in in_flight:
                    if all(future.done() for future in call.values()):
                        for key, future in call.items():
                            handle(key, future)
                    else:
                        still.append(call)
                in_flight = still

        for call in calls:
            settle(self._max_in_flight - 1)
            try:
                in_flight.append(call())
            except KafkaException as error:
                raise self._unavailable(stage, describe_error(error), cause=error) from None
            peak = max(peak, len(in_flight))
        settle(0)
        self.last_peak_in_flight[stage] = max(peak, self.last_peak_in_flight.get(stage, 0))

    def _wait_any(self, stage: str, futures: Sequence[Future | None]) -> None:
        pending = [future for future in futures if future is not None and not future.done()]
        if not pending:
            return
        done, _ = wait(pending, timeout=self._timeout + WAIT_GRACE_SECONDS, return_when=FIRST_COMPLETED)
        if not done:
            raise self._unavailable(stage, f"no answer within {self._timeout:g}s")

    @contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        """Times the stage: ``last_timings`` (seconds) and ``last_cpu`` (this
        process's CPU seconds, librdkafka's threads included; not a JVM's)."""
        started, cpu = time.monotonic(), time.process_time()
        try:
            yield
        finally:
            self.last_timings[name] = time.monotonic() - started
            self.last_cpu[name] = time.process_time() - cpu

    def _unavailable(
        self, stage: str, detail: str, *, cause: BaseException | None = None, refused: bool = False,
    ) -> KafkaUnavailable:
        """The error to raise; ``AccessRefused`` when ``refused`` or ``cause``
        is a refusal by the broker's authorizer or of the login."""
        if self._admin is not None:
            self._admin.poll(0)  # serve the client's error callbacks
        for reader in self._offsets_readers.values():
            reader.poll(0)
        window = 2 * self._timeout + WAIT_GRACE_SECONDS
        recent = time.monotonic() - self._reported.at < window
        reported = f" (the client reported {self._reported.text})" if self._reported.text and recent else ""
        # A refused login makes requests time out: say first that the login was refused, and how.
        login_refused = time.monotonic() - self._reported.refusal_at < window
        lead = "login refused: " if login_refused else ""
        if login_refused and self._reported.refusal_text != self._reported.text:
            reported = f" (the client reported {self._reported.refusal_text}, then {self._reported.text})"
        message = secret_redact(f"Kafka at {self._config.bootstrap_servers}: {lead}{stage}: {detail}{reported}",
                                *self._config.secrets)
        refused = (refused or (login_refused and self._reported.refusal_code in LASTING_REFUSALS)
                   or (cause is not None and error_code(cause) in LASTING_REFUSALS))
        kind = AccessRefused if refused else KafkaUnavailable
        return kind(message, bootstrap_servers=self._config.bootstrap_servers, stage=stage)


def topic_details(name: str, description: Any) -> TopicDetails:
    """A TopicDescription as plain data, partition ids sorted."""
    partitions = description.partitions
    operations = getattr(description, "authorized_operations", None)
    return TopicDetails(
        name=name,
        topic_id=str(description.topic_id) if description.topic_id is not None else "",
        is_internal=bool(description.is_internal),
        partition_ids=tuple(sorted(partition.id for partition in partitions)),
        replication_factor=max((len(partition.replicas) for partition in partitions), default=1),
        may_read=None if operations is None else bool({AclOperation.READ, AclOperation.ALL} & set(operations)),
        may_write=None if operations is None else bool({AclOperation.WRITE, AclOperation.ALL} & set(operations)),
    )


def group_from(group_id: str, state: ConsumerGroupState, description: Any) -> DescribedGroup:
    """A ConsumerGroupDescription as plain data, members sorted by id."""
    members = (
        MemberSnapshot(
            member_id=member.member_id,
            client_id=member.client_id or "",
            host=member.host or "",
            assignment=frozenset(
                (partition.topic, partition.partition)
                for partition in (member.assignment.topic_partitions if member.assignment else [])
            ),
            target_assignment=frozenset(
                (partition.topic, partition.partition)
                for partition in (member.target_assignment.topic_partitions if member.target_assignment else [])
            ),
        )
        for member in description.members or []
    )
    return DescribedGroup(
        group_id=group_id,
        state=_STATE_NAMES.get(state, state.name.title()),
        type=getattr(description, "type", ConsumerGroupType.UNKNOWN).name.lower(),
        assignor=description.partition_assignor or "",
        members=tuple(sorted(members, key=lambda member: member.member_id)),
    )


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first_pending(call: dict[Any, Future]) -> Future | None:
    """One unanswered future of a call, None when all are answered."""
    return next((future for future in call.values() if not future.done()), None)
