"""``PartitionGuard``: the rebalance callback that starts new partitions at
their beginning instead of at ``auto.offset.reset``.

Offsets mean "the next message to read". A partition's *start* reported to
Gapwatch is the log start offset the guard looked up just before assigning;
the partition itself is assigned at ``OFFSET_BEGINNING``, so a segment deleted
by retention in between can never send it to ``auto.offset.reset``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple
from urllib.parse import urlsplit, urlunsplit

import redis
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from redis.backoff import NoBackoff
from redis.retry import Retry

from gapwatch_guard.keys import guard_starts_key, known_partitions_key
from gapwatch_guard.plan import TopicAssignment, TopicPlan, plan_topic

log = logging.getLogger("gapwatch_guard")

EAGER = "eager"
COOPERATIVE = "cooperative"
_PROTOCOLS = ("auto", EAGER, COOPERATIVE)


class GuardError(Exception):
    """Base class of the guard's errors."""


class GuardUnavailableError(GuardError):
    """Raised from ``on_assign`` (and so from ``consumer.poll()``) when the guard
    fails closed: it could not tell new partitions from known ones.

    ``paused`` lists the (topic, partition) pairs it assigned but paused: the
    ones without a committed offset, which would otherwise have started at
    ``auto.offset.reset`` (they are assigned at their beginning when the
    committed offsets were read, in case librdkafka loses the pause).
    """

    def __init__(self, message: str, *, paused: List[Tuple[str, int]]) -> None:
        super().__init__(message)
        self.paused = paused


class PartitionGuard:
    """Guards one consumer group: ``consumer.subscribe(topics, on_assign=guard.on_assign)``.

    ``cluster`` is the cluster's name in Gapwatch and ``group_id`` the
    consumer's ``group.id``: together they name the Redis keys. One guard may
    serve several consumers of the same group in one process.

    ``fail_open=False`` (the default): when Redis (or the group's committed
    offsets) cannot be read during a rebalance that assigns a partition without
    a committed offset, ``on_assign`` pauses those partitions and raises
    ``GuardUnavailableError``. ``fail_open=True``: it logs a warning and lets
    them start at ``auto.offset.reset``, as without a guard.

    ``kafka_config``: the consumer's configuration (its connection and
    security settings are used): the guard reads topic metadata and log starts
    with a client of its own (see ``_topic_metadata``).

    ``rebalance_protocol``: ``"auto"`` finds out per consumer whether to call
    ``assign`` (eager) or ``incremental_assign`` (cooperative-sticky, KIP-848);
    ``"eager"`` or ``"cooperative"`` skip the detection.
    """

    def __init__(
        self,
        *,
        cluster: str,
        group_id: str,
        redis_url: Optional[str] = None,
        redis_client: Optional[redis.Redis] = None,
        fail_open: bool = False,
        rebalance_protocol: str = "auto",
        kafka_config: Dict[str, Any],
        kafka_timeout: float = 10.0,
        redis_timeout: float = 2.0,
    ) -> None:
        if not cluster or ":" in cluster:
            raise ValueError("cluster must be the cluster's name in Gapwatch (non-empty, no ':')")
        if not group_id:
            raise ValueError("group_id must be the consumer's group.id")
        if (redis_url is None) == (redis_client is None):
            raise ValueError("pass exactly one of redis_url and redis_client")
        if not kafka_config.get("bootstrap.servers"):
            raise ValueError("kafka_config must hold the consumer's bootstrap.servers (and its security settings)")
        if rebalance_protocol not in _PROTOCOLS:
            raise ValueError(f"rebalance_protocol must be one of {', '.join(_PROTOCOLS)}")
        self.cluster = cluster
        self.group_id = group_id
        self.fail_open = fail_open
        self.kafka_timeout = kafka_timeout
        self._rebalance_protocol = rebalance_protocol
        self._metadata_config = connection_settings(kafka_config)
        self._metadata_client: Optional[AdminClient] = None
        if redis_client is None:
            # Short timeouts and one quick retry: a rebalance must not hang on Redis.
            redis_client = redis.Redis.from_url(
                redis_url, socket_connect_timeout=redis_timeout, socket_timeout=redis_timeout,
                retry=Retry(NoBackoff(), 1),
            )
            self._redis_name = _redacted(redis_url)
        else:
            self._redis_name = _described(redis_client)
        self._redis = redis_client
        self._lock = threading.Lock()
        self._protocols: Dict[int, str] = {}
        self._paused: Dict[int, Set[Tuple[str, int]]] = defaultdict(set)

    # --- The callback ---------------------------------------------------------

    def on_assign(self, consumer, partitions: List[TopicPartition]) -> None:
        """Assign ``partitions`` to ``consumer``, new ones at their beginning.

        1. Read the group's committed offsets of the assigned partitions. With
           a commit everywhere, assign and stop: Redis is not needed.
        2. Read the known-partition set of each topic with an uncommitted
           partition (and, when there is none, the topic's partitions and
           commits) and apply ``plan_topic``.
        3. Look up the log start of each new partition, record it with HSETNX
           and add known partitions with SADD, in one round trip.
        4. Assign, new partitions at ``OFFSET_BEGINNING``.
        """
        if not partitions:
            self._assign(consumer, partitions)
            return
        try:
            committed = self._committed(consumer, partitions)
        except KafkaException as error:
            self._fail(consumer, partitions, None, "could not read the group's committed offsets", error)
            return
        if all(offset is not None for offset in committed.values()):
            self._resume_paused(consumer, partitions)
            self._assign(consumer, partitions)
            return
        try:
            plans = self._plan(consumer, committed)
        except (redis.RedisError, KafkaException) as error:
            self._fail(consumer, partitions, committed, "could not read the known-partition sets", error)
            return
        starts = self._log_starts(consumer, plans)
        assignment = _planned_assignment(partitions, plans)
        try:
            self._record(plans, starts)
        except redis.RedisError as error:
            self._fail(consumer, partitions, committed, "could not record the new partitions", error,
                       planned=assignment)
            return
        self._resume_paused(consumer, assignment)
        self._assign(consumer, assignment)
        _log_plans(plans, starts, self.group_id)

    # --- Reads for operators and tests ----------------------------------------

    def known_partitions(self, topic: str) -> frozenset:
        key = known_partitions_key(cluster=self.cluster, topic=topic, group_id=self.group_id)
        return frozenset(int(member) for member in self._redis.smembers(key))

    def reported_starts(self, topic: str) -> Dict[int, int]:
        key = guard_starts_key(cluster=self.cluster, topic=topic, group_id=self.group_id)
        return {int(field): int(value) for field, value in self._redis.hgetall(key).items()}

    # --- Steps ----------------------------------------------------------------

    def _committed(self, consumer, partitions: Iterable[TopicPartition]) -> Dict[Tuple[str, int], Optional[int]]:
        """(topic, partition) -> committed offset, None without one."""
        asked = [TopicPartition(p.topic, p.partition) for p in partitions]
        answer = consumer.committed(asked, timeout=self.kafka_timeout)
        for tp in answer:
            if tp.error is not None:
                raise KafkaException(tp.error)
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in answer}

    def _plan(self, consumer, committed: Dict[Tuple[str, int], Optional[int]]) -> List[TopicPlan]:
        by_topic: Dict[str, Dict[str, Set[int]]] = defaultdict(lambda: {"committed": set(), "uncommitted": set()})
        for (topic, partition), offset in committed.items():
            by_topic[topic]["committed" if offset is not None else "uncommitted"].add(partition)
        topics = sorted(topic for topic, parts in by_topic.items() if parts["uncommitted"])
        pipe = self._redis.pipeline(transaction=False)
        for topic in topics:
            pipe.smembers(known_partitions_key(cluster=self.cluster, topic=topic, group_id=self.group_id))
        known_sets = pipe.execute()
        plans = []
        for topic, members in zip(topics, known_sets):
            known = frozenset(int(member) for member in members)
            topic_partitions: frozenset = frozenset()
            committed_on_topic: frozenset = frozenset()
            if not known:
                topic_partitions = self._topic_partitions(consumer, topic)
                everywhere = self._committed(consumer, (TopicPartition(topic, p) for p in sorted(topic_partitions)))
                committed_on_topic = frozenset(p for (_, p), offset in everywhere.items() if offset is not None)
            plans.append(plan_topic(TopicAssignment(
                topic=topic, committed=frozenset(by_topic[topic]["committed"]),
                uncommitted=frozenset(by_topic[topic]["uncommitted"]), known=known,
                committed_on_topic=committed_on_topic, topic_partitions=topic_partitions,
            )))
        return plans

    def _topic_metadata(self, topic: str):
        """The topic's metadata, asked with a client of the guard's own.

        Never with ``consumer.list_topics`` inside the callback: confluent-kafka
        keeps a per-thread call state for the ``poll()`` that runs the callback,
        and ``list_topics`` on the same consumer clears it when it returns, so
        the next callback that ``poll()`` serves aborts the process
        (``CallState_get: Assertion `cs != NULL' failed``: the test suite's
        flake, issue 20). Another client keeps a call state of its own. (Asked
        from another thread instead, ``list_topics`` waits forever on the
        consumer inside its rebalance.)"""
        return self._client().list_topics(topic, timeout=self.kafka_timeout).topics.get(topic)

    def _client(self) -> AdminClient:
        with self._lock:
            if self._metadata_client is None:
                self._metadata_client = AdminClient(self._metadata_config)
            return self._metadata_client

    def _topic_partitions(self, consumer, topic: str) -> frozenset:
        metadata = self._topic_metadata(topic)
        if metadata is None or metadata.error is not None:
            raise KafkaException(metadata.error if metadata is not None else KafkaError(KafkaError._UNKNOWN_TOPIC))
        return frozenset(metadata.partitions)

    def _log_starts(self, consumer, plans: List[TopicPlan]) -> Dict[Tuple[str, int], int]:
        """The log start of each partition to rewind, in one request, asked with
        the guard's own client (see ``_topic_metadata``): the consumer's
        metadata may not know a partition the group leader just assigned
        (``_UNKNOWN_PARTITION``), and refreshing it would take the consumer's
        ``list_topics``. The guard's client may not know it either ("No leaders
        found"): then its metadata of those topics is refreshed and the
        partitions it failed on are asked again, twice at most. A failed
        lookup only costs that partition's report."""
        pending = sorted((plan.topic, partition) for plan in plans for partition in plan.rewind)
        starts: Dict[Tuple[str, int], int] = {}
        errors: Dict[Tuple[str, int], Exception] = {}
        for attempt in range(3):
            if not pending:
                break
            if attempt:
                for topic in sorted({topic for topic, _ in pending}):
                    try:
                        self._topic_metadata(topic)
                    except KafkaException:
                        pass  # asked again below all the same; its error is the one reported
                time.sleep(0.1 * attempt)
            futures = self._client().list_offsets(
                {TopicPartition(topic, partition): OffsetSpec.earliest() for topic, partition in pending},
                request_timeout=self.kafka_timeout)
            errors = {}
            for tp, future in futures.items():
                try:
                    starts[(tp.topic, tp.partition)] = future.result(timeout=self.kafka_timeout).offset
                except KafkaException as error:
                    errors[(tp.topic, tp.partition)] = error
            pending = sorted(errors)
        for (topic, partition), error in sorted(errors.items()):
            log.warning("gapwatch-guard: could not look up the log start of %s[%d]; starting it at the "
                        "beginning without a report: %s", topic, partition, error)
        return starts

    def _record(self, plans: List[TopicPlan], starts: Dict[Tuple[str, int], int]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for plan in plans:
            if plan.remember:
                key = known_partitions_key(cluster=self.cluster, topic=plan.topic, group_id=self.group_id)
                pipe.sadd(key, *(str(p) for p in sorted(plan.remember)))
        for (topic, partition), offset in sorted(starts.items()):
            # HSETNX: the first start wins; a later rebalance must not move it.
            key = guard_starts_key(cluster=self.cluster, topic=topic, group_id=self.group_id)
            pipe.hsetnx(key, str(partition), str(offset))
        if len(pipe):
            pipe.execute()

    def _fail(self, consumer, partitions, committed, what: str, error: Exception, planned=None) -> None:
        """Fail open (assign, warn) or closed (assign, pause what is at risk, raise)."""
        at_risk = sorted(
            (p.topic, p.partition) for p in partitions
            if committed is None or committed.get((p.topic, p.partition)) is None
        )
        where = (f"group {self.group_id!r} (cluster {self.cluster!r}, Redis {self._redis_name}), "
                 f"partitions {_names(at_risk)}")
        if self.fail_open:
            log.warning("gapwatch-guard: %s for %s (%s). Failing open: %s.", what, where, error,
                        "the new partitions are started at the beginning but not reported" if planned
                        else "partitions without a committed offset start at auto.offset.reset")
            self._assign(consumer, planned or partitions)
            return
        # Paused before the assignment as well as after it. librdkafka versions a
        # partition's operations, and a pause that crosses the assignment's own
        # fetch start (after its committed-offset lookup) is dropped as outdated,
        # silently: seen once under load, when the partition started at latest. A
        # pause served before the assignment cannot cross it; the second pause is
        # for partitions the consumer did not know until the assignment. Should
        # both be lost, an uncommitted partition is still assigned at its beginning,
        # never at auto.offset.reset: read twice rather than skipped.
        pauses = [TopicPartition(topic, partition) for topic, partition in at_risk]
        if pauses:
            with self._lock:
                self._paused[id(consumer)].update(at_risk)
            consumer.pause(pauses)
        self._assign(consumer, _from_beginning(partitions, committed) if committed is not None else partitions)
        if pauses:
            consumer.pause(pauses)
        message = (
            f"gapwatch-guard failed closed: {what} for {where} ({error}). It cannot tell new partitions from "
            "known ones, so the partitions without a committed offset are paused instead of starting at "
            "auto.offset.reset. Close this consumer and start it again once Redis is reachable (or construct "
            "PartitionGuard(fail_open=True) to accept the skip)."
        )
        # Logged as well: an application that swallows poll()'s exceptions still leaves a trace.
        log.error(message)
        raise GuardUnavailableError(message, paused=at_risk) from error

    def _resume_paused(self, consumer, assignment: List[TopicPartition]) -> None:
        """Undo an earlier fail-closed pause once the guard decided these partitions.

        Called before they are assigned: ``on_assign`` lists partitions the
        consumer does not own (eager revoked everything; cooperative lists the
        added ones), so nothing fetches in between, and a resume served before
        the assignment cannot be dropped by its fetch start (see ``_fail``)."""
        with self._lock:
            paused = self._paused.get(id(consumer))
            again = [p for p in assignment if paused and (p.topic, p.partition) in paused]
            for p in again:
                paused.discard((p.topic, p.partition))
        if again:
            consumer.resume([TopicPartition(p.topic, p.partition) for p in again])

    def _assign(self, consumer, partitions: List[TopicPartition]) -> None:
        """``assign`` for eager consumers, ``incremental_assign`` for cooperative ones.

        The Python client does not expose librdkafka's rebalance protocol, but
        each call refuses the wrong protocol with ``_STATE`` without changing
        the assignment. So try the likely one, fall back to the other, and
        remember per consumer. An eager consumer has an empty assignment in
        ``on_assign`` (it revoked everything first): a non-empty one means
        cooperative.
        """
        if self._rebalance_protocol != "auto":
            _call(consumer, self._rebalance_protocol, partitions)
            return
        with self._lock:
            protocol = self._protocols.get(id(consumer))
        if protocol is None:
            protocol = COOPERATIVE if consumer.assignment() else EAGER
        try:
            _call(consumer, protocol, partitions)
        except KafkaException as error:
            if error.args[0].code() != KafkaError._STATE:
                raise
            protocol = COOPERATIVE if protocol == EAGER else EAGER
            _call(consumer, protocol, partitions)
        with self._lock:
            self._protocols[id(consumer)] = protocol


def _call(consumer, protocol: str, partitions: List[TopicPartition]) -> None:
    if protocol == COOPERATIVE:
        consumer.incremental_assign(partitions)
    else:
        consumer.assign(partitions)


def _from_beginning(partitions: List[TopicPartition],
                    committed: Dict[Tuple[str, int], Optional[int]]) -> List[TopicPartition]:
    """The partitions, those without a committed offset at ``OFFSET_BEGINNING``."""
    return [
        TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) if committed.get((p.topic, p.partition)) is None
        else p
        for p in partitions
    ]


def _planned_assignment(partitions: List[TopicPartition], plans: List[TopicPlan]) -> List[TopicPartition]:
    rewind = {(plan.topic, p) for plan in plans for p in plan.rewind}
    return [
        TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) if (p.topic, p.partition) in rewind else p
        for p in partitions
    ]


def _log_plans(plans: List[TopicPlan], starts: Dict[Tuple[str, int], int], group_id: str) -> None:
    for plan in plans:
        if plan.rewind:
            at = ", ".join(f"{p} at {starts.get((plan.topic, p), 'the beginning')}" for p in sorted(plan.rewind))
            level = logging.WARNING if plan.basis == "no known set, group has commits" else logging.INFO
            log.log(level, "gapwatch-guard: group %r, topic %s (%s): new partitions without a committed offset "
                    "start at their log start: %s", group_id, plan.topic, plan.basis, at)
        if plan.default and plan.basis == "first start":
            log.info("gapwatch-guard: group %r, topic %s: first start, partitions %s follow auto.offset.reset",
                     group_id, plan.topic, sorted(plan.default))


# The settings that reach and authenticate to the cluster; the consumer's own
# (group.id, auto.offset.reset, ...) are no concern of the metadata client.
_CONNECTION_PREFIXES = ("bootstrap.servers", "security.protocol", "ssl.", "ssl_", "sasl.", "socket.", "broker.",
                        "client.", "enable.ssl.", "enable.sasl.", "oauth_cb", "api.version", "metadata.")


def connection_settings(kafka_config: Dict[str, Any]) -> Dict[str, Any]:
    """The part of a consumer's configuration that connects and authenticates."""
    return {key: value for key, value in kafka_config.items() if key.startswith(_CONNECTION_PREFIXES)}


def _names(pairs: List[Tuple[str, int]]) -> str:
    by_topic: Dict[str, List[int]] = defaultdict(list)
    for topic, partition in pairs:
        by_topic[topic].append(partition)
    return ", ".join(f"{topic}{sorted(parts)}" for topic, parts in sorted(by_topic.items())) or "none"


def _described(client: redis.Redis) -> str:
    """host:port/db of an injected client; its repr may carry the password."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if "host" not in kwargs:
        return "(client given)"
    return f"{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))
