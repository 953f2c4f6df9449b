"""Gapwatch as a brief member of live consumer groups (issue 43).

An outsider cannot commit offsets to a group that has members; a member can,
for any partition (REFERENCE.md, "Checked 2026-11-29"), and a member newly
given a partition starts at the group's committed offset before it looks at
``auto.offset.reset``. So ``Membership`` seats one member of Gapwatch's own
in each group to protect, subscribed only to Gapwatch's anchor topic (one
partition, no records): it takes none of the group's partitions. Its caller
adds the partitions, commits each new one at its log start through the seat,
asks who holds them, and leaves:

    with Membership(config, client_id=...) as seats:
        refused = seats.join(groups, within=60)   # {group: why not}
        ...add the partitions...
        seats.commit_each({group: offsets})       # {group: SeatCommit(why="" or why not, after=s)}
        seats.holders(group, topic, partitions)   # {partition: member}
    # every seat has left (LeaveGroup), on every path

The seat's session is short (classic: ``session.timeout.ms`` 10 s, and a
rebalance waits for it at most ``max.poll.interval.ms``, 30 s): a process
that dies while seated holds a classic group back at most that long. A
KIP-848 group does not wait for members; the broker drops a dead seat after
its ``group.consumer.session.timeout.ms`` (45 s by default), and the seat
holds only the anchor's partition meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import NewTopic

from groups.domain.cluster_config import ClusterConfig
from groups.domain.membership import seat_problem
from adapters.kafka.client import WAIT_GRACE_SECONDS, KafkaClient, group_from
from adapters.kafka.errors import COORDINATOR_BUSY, TOPIC_GONE, KafkaUnavailable, describe_error, error_code

CLASSIC_SESSION_MS = 10_000
CLASSIC_MAX_POLL_MS = 30_000
# Refusals the seat's client reports that asking again cannot change.
SEAT_REFUSALS = {
    KafkaError.GROUP_AUTHORIZATION_FAILED: "missing ACL: Read on the group for the principal Gapwatch connects as",
    KafkaError.TOPIC_AUTHORIZATION_FAILED:
        "missing ACL: Read on the anchor topic (or Describe on the group's topic) for the principal Gapwatch "
        "connects as",
    KafkaError.INCONSISTENT_GROUP_PROTOCOL:
        "the group's members use an assignor Gapwatch's member cannot offer",
    KafkaError.GROUP_MAX_SIZE_REACHED: "the group is full (group.max.size / group.consumer.max.size reached)",
    KafkaError.UNSUPPORTED_ASSIGNOR: "the broker does not know the assignor",
    KafkaError.UNSUPPORTED_VERSION: "the broker does not support this group protocol",
    KafkaError.FENCED_INSTANCE_ID: "a static member with the same instance id fenced the seat",
    KafkaError.INVALID_SESSION_TIMEOUT: "the broker refuses the seat's session timeout",
}
# Answers to a seat's commit worth asking again within the time left: the
# partition not in the coordinator's metadata yet (right after
# CreatePartitions), a rebalance, a coordinator moving.
COMMIT_RETRIABLE = frozenset({
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
    KafkaError.REBALANCE_IN_PROGRESS, KafkaError._WAIT_COORD, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
    *COORDINATOR_BUSY,
})


@dataclass(frozen=True)
class SeatRequest:
    """One group to sit in: ``protocol`` "classic" or "consumer" (KIP-848);
    ``assignor`` the classic group's protocol name, as DescribeGroups says."""

    group_id: str
    protocol: str
    assignor: str = ""


@dataclass(frozen=True)
class SeatCommit:
    """One group's commit through its seat: ``why`` it failed ("" it did not),
    ``after`` seconds from the start of ``commit_each`` to its end. After a
    commit that went through, what the broker said at once, in the commit's
    own thread: ``held``, each committed partition a member of the group
    other than the seat held (by client id), and ``read``, the group's
    committed offsets read back (``read_back``); ``unjudged`` why those could
    not be read ("" they were)."""

    why: str
    after: float
    held: Mapping[tuple[str, int], str] = field(default_factory=dict)
    read: Mapping[tuple[str, int], int | None] = field(default_factory=dict)
    unjudged: str = ""


def _seat_problem(request: SeatRequest) -> str:
    return seat_problem(protocol=request.protocol, assignor=request.assignor)


@dataclass
class _Seat:
    request: SeatRequest
    consumer: Consumer | None = None
    joined_after: float | None = None
    problem: str = ""
    errors: list[str] = field(default_factory=list)

    def on_error(self, error: KafkaError) -> None:
        self.errors.append(f"{error.name()}: {error.str()}")
        if error.code() in SEAT_REFUSALS and not self.problem:
            self.problem = f"{SEAT_REFUSALS[error.code()]} ({error.name()})"


class Membership(KafkaClient):
    """Seats of Gapwatch's own in consumer groups; a context manager that
    leaves every group on exit."""

    def __init__(self, config: ClusterConfig, *, client_id: str, anchor_topic: str, timeout: float = 10.0) -> None:
        super().__init__(config, timeout=timeout)
        self.client_id = client_id
        self.anchor_topic = anchor_topic
        self._seats: dict[str, _Seat] = {}

    def __enter__(self) -> Membership:
        return self

    def __exit__(self, *exc) -> None:
        self.leave()

    # -- join --------------------------------------------------------------------------------

    def ensure_anchor(self) -> None:
        """The anchor topic exists (one partition, made now if missing)."""
        futures = self.admin.create_topics([NewTopic(self.anchor_topic, 1, -1)], request_timeout=self._timeout)
        try:
            futures[self.anchor_topic].result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if error_code(error) != KafkaError.TOPIC_ALREADY_EXISTS:
                raise self._unavailable("protect", f"create the anchor topic {self.anchor_topic!r}: "
                                        f"{describe_error(error, operation='Create', topic=self.anchor_topic)}",
                                        cause=error) from None

    def _consumer(self, seat: _Seat) -> Consumer:
        request = seat.request
        settings = {
            **self._config.librdkafka_options(), "group.id": request.group_id, "client.id": self.client_id,
            "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "latest",
            "socket.timeout.ms": int(self._timeout * 1000), "error_cb": seat.on_error,
        }
        if request.protocol == "consumer":
            settings["group.protocol"] = "consumer"
        else:
            settings.update({"session.timeout.ms": CLASSIC_SESSION_MS, "heartbeat.interval.ms": 1000,
                             "max.poll.interval.ms": CLASSIC_MAX_POLL_MS,
                             "partition.assignment.strategy": request.assignor or "range"})
        return Consumer(settings)

    def seat(self, requests: Sequence[SeatRequest]) -> None:
        """Start taking a seat in each group (``serve`` completes the joins)."""
        for request in requests:
            seat = self._seats[request.group_id] = _Seat(request)
            seat.problem = _seat_problem(request)
            if seat.problem:
                continue
            started = time.monotonic()

            def assigned(consumer, partitions, seat=seat, started=started) -> None:
                if seat.joined_after is None:
                    seat.joined_after = time.monotonic() - started
            try:
                seat.consumer = self._consumer(seat)
                seat.consumer.subscribe([self.anchor_topic], on_assign=assigned)
            except KafkaException as error:
                seat.problem = f"the seat's client refused its settings: {describe_error(error)}"

    def serve(self, wait: float = 0.0) -> None:
        """Poll every seat once: joins and rebalances complete only while a
        seat's client is polled (a classic group waits for its members to
        rejoin), and a seat not polled within its max.poll.interval.ms leaves."""
        for seat in list(self._seats.values()):
            if seat.consumer is not None:
                self._serve(seat, wait)

    def join(self, requests: Sequence[SeatRequest], *, within: float) -> dict[str, str]:
        """Take a seat in each group at once; wait until each has its
        assignment (the anchor's partition), a refusal, or ``within`` seconds.
        Returns, per group of ``requests`` not seated, why."""
        started = time.monotonic()
        self.seat(requests)
        wanted = [self._seats[r.group_id] for r in requests]
        while time.monotonic() - started < within:
            waiting = [s for s in wanted if s.consumer and s.joined_after is None and not s.problem]
            if not waiting:
                break
            for seat in waiting:
                self._serve(seat, 0.02)
        return {seat.request.group_id: self.why_not_seated(seat.request.group_id, within=within)
                for seat in wanted if seat.joined_after is None or seat.problem}

    def why_not_seated(self, group_id: str, *, within: float | None = None) -> str:
        """Why the group has no seat ("" when it has one)."""
        seat = self._seats.get(group_id)
        if seat is None:
            return "no seat asked"
        if seat.problem:
            return seat.problem
        if seat.joined_after is not None:
            return ""
        waited = f"no seat within {within:g} s" if within is not None else "not seated yet"
        return (f"{waited} (a classic group's join waits for its slowest member to rejoin)"
                + (f"; the client reported {seat.errors[-1]}" if seat.errors else ""))

    def seated(self) -> list[str]:
        """The groups where a seat is taken now."""
        return sorted(g for g, s in self._seats.items() if s.consumer is not None and s.joined_after is not None
                      and not s.problem)

    def drop(self, group_id: str) -> str:
        """Leave one group (see ``leave``); "" when it left cleanly or had no seat."""
        seat = self._seats.pop(group_id, None)
        if seat is None or seat.consumer is None:
            return ""
        try:
            seat.consumer.close()
            return ""
        except (KafkaException, RuntimeError) as error:
            return describe_error(error) if isinstance(error, KafkaException) else str(error)

    def _serve(self, seat: _Seat, wait: float) -> None:
        """Poll the seat's client: its callbacks, its (empty) anchor partition, errors it reports."""
        message = seat.consumer.poll(wait)
        if message is not None and message.error() is not None:
            seat.on_error(message.error())

    def joined_after(self, group_id: str) -> float | None:
        seat = self._seats.get(group_id)
        return None if seat is None else seat.joined_after

    def member_id(self, group_id: str) -> str:
        seat = self._seats.get(group_id)
        if seat is None or seat.consumer is None:
            return ""
        try:
            return seat.consumer.memberid() or ""
        except (KafkaException, RuntimeError):
            return ""

    # -- commit and check --------------------------------------------------------------------

    def commit(self, group_id: str, offsets: Mapping[tuple[str, int], int], *, within: float) -> str:
        """Commit ``offsets`` through the group's seat, asking again on
        answers that can change (the partitions unknown to the coordinator
        for a moment after CreatePartitions, a rebalance) for ``within``
        seconds. "" when every partition was committed, else why not."""
        seat = self._seats.get(group_id)
        if seat is None or seat.consumer is None or seat.joined_after is None:
            return "not seated in the group"
        wanted = [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
        deadline = time.monotonic() + within
        last = ""
        while True:
            try:
                answer = seat.consumer.commit(offsets=wanted, asynchronous=False)
                failed = [tp for tp in answer or [] if tp.error is not None]
                if not failed:
                    return ""
                codes = {tp.error.code() for tp in failed}
                last = "; ".join(
                    f"{tp.topic!r} [{tp.partition}]: "
                    + describe_error(tp.error, operation="Read", group=group_id, topic=tp.topic)
                    for tp in failed[:3])
                if not codes <= COMMIT_RETRIABLE:
                    return f"the commit was refused: {last}"
            except KafkaException as error:
                last = describe_error(error, operation="Read", group=group_id)
                if error_code(error) not in COMMIT_RETRIABLE:
                    return f"the commit was refused: {last}"
            if time.monotonic() >= deadline:
                return f"the commit did not go through within {within:g} s: {last}"
            self._serve(seat, 0.05)

    def commit_each(self, offsets: Mapping[str, Mapping[tuple[str, int], int]], *, within: float,
                    read_back: Callable[..., Mapping[tuple[str, int], int | None]]) -> dict[str, SeatCommit]:
        """``commit`` through every group's seat at once, one thread a seat
        (each polls only its own client), each commit that went through
        judged in its thread at once: which members hold the partitions now
        (``holders``), and the group's commits read back
        (``read_back(group_id=..., partitions=[...])``, a KafkaAdapter's
        ``committed_offsets``).

        The commits race the groups' pickup (a KIP-848 member is handed a new
        partition at its next heartbeat), so none waits behind another group's
        retries: committed one after another, the last group's commit came
        about 0.4 s after the first on a busy machine, and its member held the
        partitions by then. A member that holds a partition when the check
        reads may have taken it before the commit or after it (then it starts
        at the commit): only a check made at once keeps that doubt short;
        judged one group after another, the fourth was read 0.8 s after the
        first on a slow machine, and a KIP-848 member handed the partitions
        after its commit counted as a lost race."""
        if not offsets:
            return {}
        started = time.monotonic()

        def commit(group_id: str) -> SeatCommit:
            wanted = offsets[group_id]
            why = self.commit(group_id, wanted, within=within)
            after = time.monotonic() - started
            if why:
                return SeatCommit(why=why, after=after)
            held: dict[tuple[str, int], str] = {}
            try:
                for topic in sorted({topic for topic, _ in wanted}):
                    mine = sorted(p for t, p in wanted if t == topic)
                    held.update({(topic, p): who for p, who in self.holders(group_id, topic, mine).items()})
                read = read_back(group_id=group_id, partitions=sorted(wanted))
            except KafkaUnavailable as error:
                return SeatCommit(why="", after=after, unjudged=str(error))
            return SeatCommit(why="", after=after, held=held, read=read)

        with ThreadPoolExecutor(max_workers=len(offsets), thread_name_prefix="seat-commit") as pool:
            running = {group_id: pool.submit(commit, group_id) for group_id in offsets}
            return {group_id: future.result() for group_id, future in running.items()}

    def holders(self, group_id: str, topic: str, partitions: Sequence[int]) -> dict[int, str]:
        """Which of ``partitions`` a member of the group other than the seat
        holds now, by the member's client id; from DescribeGroups
        (ConsumerGroupDescribe for KIP-848: the assignment the member was given)."""
        own = self.member_id(group_id)
        futures = self.admin.describe_consumer_groups([group_id], request_timeout=self._timeout)
        try:
            description = futures[group_id].result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._unavailable("protect", f"describe group {group_id!r}: "
                                    f"{describe_error(error, group=group_id)}", cause=error) from None
        group = group_from(group_id, description.state, description)
        wanted = {(topic, p) for p in partitions}
        return {p: member.client_id or member.member_id for member in group.members if member.member_id != own
                for (t, p) in member.assignment & wanted}

    # -- leave -------------------------------------------------------------------------------

    def leave(self) -> dict[str, str]:
        """Every seat leaves its group (LeaveGroup; KIP-848: a heartbeat at
        epoch -1). Returns, per group, what went wrong on leaving ("" none):
        a seat that could not say goodbye is dropped by its session timeout."""
        return {group_id: self.drop(group_id) for group_id, seat in list(self._seats.items())
                if seat.consumer is not None}

    def partition_counts(self, topics: Sequence[str]) -> dict[str, tuple[str, int]]:
        """(topic id, partition count) of each of ``topics`` that exists, in one
        request (a topic that does not exist is left out)."""
        if not topics:
            return {}
        futures = self.admin.describe_topics(TopicCollection(list(topics)), request_timeout=self._timeout)
        found = {}
        for name, future in futures.items():
            try:
                description = future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
            except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
                if error_code(error) in TOPIC_GONE:
                    continue
                raise self._unavailable("protect", f"describe topic {name!r}: {describe_error(error, topic=name)}",
                                        cause=error) from None
            found[name] = (str(description.topic_id), len(description.partitions))
        return found
