"""Real Kafka clients for scenario tests: topics, producers and consumer
groups running in threads, as applications would run them."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.harness.class_archives import KAFKA_LIBS, java_options

# What a test writes lands once and in order: librdkafka's producer is not
# idempotent by default, and a retry after a timeout under load (or a leader
# change) can write a batch twice and shift every later offset.
EXACTLY_ONCE_WRITES = {"enable.idempotence": True}


def wait_until(predicate, *, timeout: float = 60.0, interval: float = 0.2, what: str = "condition",
               retry_on: tuple[type[Exception], ...] = ()):
    """``predicate``'s first true answer, asked every ``interval`` seconds, or an
    AssertionError naming ``what`` after ``timeout``. The one wait of the tests
    and benches; ``retry_on`` are the errors that mean "not yet" (a server
    still starting answers with errors), any other fails the wait at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except retry_on:
            result = None
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def steady(read, *, seconds: float):
    """A predicate for ``wait_until``: ``read()``'s answer, in a 1-tuple (so
    that 0 is an answer), once it is not None and has not changed for
    ``seconds``. For what says it is done only by no longer changing (a
    handler that stopped writing, a start offset the broker stores lazily)."""
    last: dict = {"value": None, "since": 0.0}

    def predicate() -> tuple | None:
        value, now = read(), time.monotonic()
        if value is None or value != last["value"]:
            last.update(value=value, since=now)
            return None
        return (value,) if now - last["since"] >= seconds else None

    return predicate


class Broker:
    def __init__(self, bootstrap: str, *, replication_factor: int = 1) -> None:
        self.bootstrap = bootstrap
        self.replication_factor = replication_factor
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **EXACTLY_ONCE_WRITES})
        self.topics: list[str] = []

    def create_topic(self, name: str, partitions: int, config: dict | None = None) -> None:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=self.replication_factor,
                         config=config or {})
        self.admin.create_topics([topic])[name].result(timeout=30)
        self.topics.append(name)
        wait_until(lambda: name in self.admin.list_topics(timeout=10).topics, what=f"topic {name}")

    def raise_partitions(self, name: str, total: int) -> None:
        self.admin.create_partitions([NewPartitions(name, total)])[name].result(timeout=30)
        # Like producers in production, ours learns the new partitions from its metadata.
        wait_until(
            lambda: len(self.producer.list_topics(name, timeout=10).topics[name].partitions) == total,
            what=f"the producer to see {total} partitions of {name}",
        )

    def produce(self, topic: str, partition: int, count: int, prefix: str = "m") -> None:
        for number in range(count):
            self.producer.poll(0)
            self.producer.produce(topic, key=f"{prefix}-{partition}-{number}", value=f"{prefix}-{number}",
                                  partition=partition)
        assert self.producer.flush(30) == 0

    def close(self) -> None:
        if self.topics:
            for future in self.admin.delete_topics(self.topics).values():
                try:
                    future.result(timeout=30)
                except Exception:  # noqa: BLE001 - best-effort cleanup
                    pass


class ReadOffsets:
    """What a consumer running in a thread read: ``received``, the offsets
    per partition in the order read, and ``first_read_at``, when (monotonic)
    each partition's first record arrived; both guarded by ``_lock``."""

    def __init__(self) -> None:
        self.received: dict[int, list[int]] = defaultdict(list)
        self.first_read_at: dict[int, float] = {}
        # When (monotonic) each record arrived, in order: the pauses a rebalance causes (``longest_pause``).
        self.read_times: list[float] = []
        self._lock = threading.Lock()

    def _record(self, partition: int, offset: int) -> None:
        with self._lock:
            now = time.monotonic()
            self.first_read_at.setdefault(partition, now)
            self.received[partition].append(offset)
            self.read_times.append(now)

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time between two records read (or ``start``/``end`` and
        the nearest record) within [start, end]: how long the member read nothing."""
        with self._lock:
            times = [t for t in self.read_times if start <= t <= end]
        marks = [start, *times, end]
        return max(b - a for a, b in zip(marks, marks[1:], strict=False))

    def count(self, partition: int) -> int:
        with self._lock:
            return len(self.received[partition])

    def offsets(self, partition: int) -> list[int]:
        with self._lock:
            return list(self.received[partition])


def close_within(close: Callable[[], object], *, seconds: float) -> None:
    """``close()`` in a thread of its own, waited for ``seconds`` at most: a
    librdkafka close blocked in C is out of pytest-timeout's reach, and a
    harness must never hang a run."""
    closing = threading.Thread(target=close, daemon=True)
    closing.start()
    closing.join(timeout=seconds)


class ShareGroupConsumer(ReadOffsets):
    """librdkafka's share consumer (confluent-kafka ``ShareConsumer``, KIP-932)
    in share group ``group_id``, polling in a thread; records are acknowledged
    implicitly (the client's default) by the next poll. It learns of new
    partitions on its own metadata refresh (``refresh_ms``)."""

    def __init__(self, bootstrap: str, group_id: str, topic: str, *, refresh_ms: int = 5000) -> None:
        super().__init__()
        self._consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                                        "client.id": f"{group_id}-rdkafka",
                                        "topic.metadata.refresh.interval.ms": refresh_ms})
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self._consumer.poll(0.5)
            except KafkaException:
                continue
            for message in messages:
                if message.error() is None:
                    self._record(message.partition(), message.offset())

    def close(self) -> None:
        """Stop polling, then close the member, for 30 s at most, as
        ``GroupConsumer.close``: in a full run one share consumer's close never
        returned (blocked in librdkafka, where no test time-out reaches)."""
        self._stop.set()
        self._thread.join(timeout=10)
        close_within(self._consumer.close, seconds=30)


class GroupConsumer(ReadOffsets):
    """One member of a consumer group, polling in a thread and committing.

    ``delay`` slows consumption (seconds per message) and commits after each
    message, so a poll can see a commit in the middle of a backlog.
    ``commit_every`` turns auto-commit off and commits synchronously (all
    consumed positions) after every that many messages instead, as an
    application that commits in batches does; ``delay`` then only slows it.
    ``assign_work_s``: seconds the ``on_assign`` callback works before it
    returns (the client fetches its start positions only afterwards).
    ``hold_new_until_written``: ``on_assign`` of a partition added after the
    first assignment returns only once the partition holds a record (its high
    watermark above 0, asked every 0.2 s for up to 120 s), as an application
    whose callback works until then would: a latest member then starts above
    offset 0 however long the producer takes to see the partition.
    ``isolation``: its ``isolation.level`` (None: librdkafka's default,
    read_committed).
    """

    def __init__(self, bootstrap: str, group_id: str, topic: str, *, offset_reset: str,
                 refresh_ms: int = 600_000, delay: float = 0.0, client_id: str | None = None,
                 protocol: str = "classic", commit_interval_ms: int = 300, commit_every: int = 0,
                 assign_work_s: float = 0.0, hold_new_until_written: bool = False,
                 isolation: str | None = None, settings: dict | None = None) -> None:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "client.id": client_id or f"{group_id}-client",
            "auto.offset.reset": offset_reset,
            "topic.metadata.refresh.interval.ms": refresh_ms,
            "enable.auto.commit": delay == 0 and commit_every == 0,
            "auto.commit.interval.ms": commit_interval_ms,
        }
        if isolation is not None:
            config["isolation.level"] = isolation
        if protocol == "classic":
            config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        else:
            # KIP-848: the broker owns session and heartbeat timing; the client refuses them.
            config["group.protocol"] = protocol
        config.update(settings or {})
        self.group_id = group_id
        self.consumer = Consumer(config)
        self.topic = topic
        self.delay = delay
        self.commit_every = commit_every
        self.assign_work_s = assign_work_s
        self.hold_new_until_written = hold_new_until_written
        self.commit_errors = 0
        super().__init__()
        self.assigned: set[int] = set()
        self._uncommitted = 0
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        if self.assign_work_s:
            time.sleep(self.assign_work_s)  # the application's own work (caches, a seek) before it reads
        if self.hold_new_until_written and self.assigned:
            added = [p.partition for p in partitions if p.partition not in self.assigned]
            wait_until(lambda: all(self._high_watermark(consumer, p) > 0 for p in added), timeout=120,
                       interval=0.2, what=f"records on partitions {added} of {self.topic}")
        with self._lock:
            self.assigned = {p.partition for p in partitions}

    def _high_watermark(self, consumer, partition: int) -> int:
        try:
            return consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5)[1]
        except KafkaException:
            return -1  # a busy broker: asked again

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                continue
            self._record(message.partition(), message.offset())
            if self.commit_every:
                self._uncommitted += 1
                if self._uncommitted >= self.commit_every:
                    try:
                        self.consumer.commit(asynchronous=False)
                        self._uncommitted = 0
                    except KafkaException:
                        self.commit_errors += 1  # e.g. a rebalance in progress: the next message retries
            elif self.delay:
                self.consumer.commit(message=message, asynchronous=False)
            if self.delay:
                time.sleep(self.delay)

    def committed(self, partitions: list[int]) -> dict[int, int]:
        result = self.consumer.committed([TopicPartition(self.topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in result}

    def close(self) -> None:
        """Stop polling, then close the member (leave the group), for 30 s at
        most: in the accuracy bench one close never returned after a trial
        deleted its topics, and a harness must not hang a run."""
        self._stop.set()
        self._thread.join(timeout=10)
        close_within(self.consumer.close, seconds=30)


def kafka_jars() -> str:
    """The class path of the broker's jars, which hold Kafka's own command-line clients."""
    return f"{KAFKA_LIBS}/*"


def _stop(process: subprocess.Popen, *, grace: float) -> None:
    """SIGTERM, ``grace`` seconds to exit (a JVM's shutdown hooks: a client
    leaving its group), then SIGKILL; reaped either way."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def streams_jars() -> str:
    """The class path of Kafka Streams and its example applications (tests only)."""
    home = os.environ.get("GAPWATCH_HOME") or os.path.join(os.path.dirname(__file__), "..", "..", ".gapwatch")
    return os.path.join(home, "lib", "streams", "*")


class KafkaStreamsWordCount:
    """Kafka's own ``WordCountDemo`` (kafka-streams-examples) as application
    ``application_id`` under the streams rebalance protocol (KIP-1071): a
    streams group reading ``WORD_COUNT_INPUT``, whose name the demo fixes.
    ``exactly_once``: ``processing.guarantee=exactly_once_v2``, so its output,
    changelog and commits are written in transactions."""

    INPUT = "streams-plaintext-input"
    OUTPUT = "streams-wordcount-output"

    def __init__(self, bootstrap: str, application_id: str, state_dir: str, *, exactly_once: bool = False) -> None:
        self.application_id = application_id
        properties = os.path.join(state_dir, "streams.properties")
        with open(properties, "w") as out:
            # No record cache: every count it updates goes to OUTPUT at once (with the commit every 500 ms).
            out.write(f"bootstrap.servers={bootstrap}\napplication.id={application_id}\ngroup.protocol=streams\n"
                      f"state.dir={state_dir}\ncommit.interval.ms=500\nstatestore.cache.max.bytes=0\n")
            if exactly_once:
                # Streams' own transaction time-out under exactly-once is 10 s: on a loaded machine a
                # transaction that takes longer is aborted by the coordinator and the producer fenced,
                # again and again. Sixty seconds is the broker's default, and what a client may ask.
                out.write("processing.guarantee=exactly_once_v2\nproducer.transaction.timeout.ms=60000\n")
        command = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", streams_jars(),
                   "org.apache.kafka.streams.examples.wordcount.WordCountDemo", properties]
        # Its log, for a test that waits on it in vain to quote (``log_tail``).
        self.log = os.path.join(state_dir, "streams.log")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` of the application's output, and whether it still runs."""
        with open(self.log, errors="replace") as log:
            tail = "".join(log.readlines()[-lines:])
        state = "running" if self.process.poll() is None else f"exited with {self.process.returncode}"
        return f"the application is {state}; its last output:\n{tail}"

    def internal_topics(self, admin: AdminClient) -> list[str]:
        """The topics Streams made for the application: its repartition topic and its count's changelog."""
        prefix = f"{self.application_id}-"
        return sorted(name for name in admin.list_topics(timeout=10).topics
                      if name.startswith(prefix) and name.endswith(("-repartition", "-changelog")))

    def close(self) -> None:
        _stop(self.process, grace=20)


class WordCountReads:
    """Which records of ``KafkaStreamsWordCount.INPUT`` the application
    processed, seen through its output: the input's values are
    ``RateProducer(tokens=True)`` words found in one record each, and a word
    on ``OUTPUT`` (word -> count) means the record holding it was counted.
    ``offsets(partition)`` maps those words back to the input's offsets (by
    reading the input partition), as ``ReadOffsets.offsets`` answers for a
    client that prints its offsets."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._words: set[str] = set()
        self._lock = threading.Lock()
        self._input: dict[int, dict[str, list[int]]] = defaultdict(dict)  # partition -> word -> its offsets
        self._input_end: dict[int, int] = defaultdict(int)
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wordcount-reads-{uuid.uuid4().hex[:6]}",
                                   "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self._consumer.subscribe([KafkaStreamsWordCount.OUTPUT])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is not None and message.error() is None and message.key() is not None:
                with self._lock:
                    self._words.add(message.key().decode())

    def _read_input(self, partition: int) -> dict[str, list[int]]:
        """The input partition's words and their offsets, read up to its end as it is now."""
        known, start = self._input[partition], self._input_end[partition]
        # A consumer of its own: one polled in another thread blocked this thread's watermark request.
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"wordcount-input-{uuid.uuid4().hex[:6]}",
                           "enable.auto.commit": False})
        position = start
        try:
            _, end = reader.get_watermark_offsets(TopicPartition(KafkaStreamsWordCount.INPUT, partition), timeout=10)
            if end > start:
                reader.assign([TopicPartition(KafkaStreamsWordCount.INPUT, partition, start)])
            deadline = time.monotonic() + 60
            while position < end and time.monotonic() < deadline:
                message = reader.poll(0.5)
                if message is None or message.error() is not None:
                    continue
                known.setdefault(message.value().decode(), []).append(message.offset())
                position = message.offset() + 1
        finally:
            reader.close()
        self._input_end[partition] = position
        return known

    def offsets(self, partition: int) -> list[int]:
        with self._lock:
            words = set(self._words)
        return sorted(offset for word, offsets in self._read_input(partition).items() if word in words
                      for offset in offsets)

    def count(self, partition: int) -> int:
        return len(self.offsets(partition))

    def close(self) -> None:
        """Stop polling, then close the member, for 30 s at most, as
        ``GroupConsumer.close``: in a full run one share consumer's close never
        returned (blocked in librdkafka, where no test time-out reaches)."""
        self._stop.set()
        self._thread.join(timeout=10)
        close_within(self._consumer.close, seconds=30)


_PRINTED = re.compile(r"Partition:(\d+)\tOffset:(\d+)")


class _PrintingClient(ReadOffsets):
    """A consumer in a process of its own (``command``) printing partition and
    offset of each record it receives as Kafka's console consumer does:
    ``received`` holds them, per partition. ``close`` sends SIGTERM and gives
    it ``grace`` seconds to leave its group; ``returncode`` is then its exit."""

    def __init__(self, command: list[str], *, grace: float) -> None:
        super().__init__()
        self.grace = grace
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            match = _PRINTED.search(line)
            if match:
                self._record(int(match.group(1)), int(match.group(2)))

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def close(self) -> None:
        _stop(self.process, grace=self.grace)
        self._thread.join(timeout=5)


class _PrintingJavaTool(_PrintingClient):
    """One of Kafka's console tools in a JVM of its own, printing partition and
    offset of each record it receives."""

    def __init__(self, tool: str, bootstrap: str, group_id: str, topic: str, *, refresh_ms: int,
                 properties: tuple[str, ...] = ()) -> None:
        command = [
            "java", *java_options("tools"), "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-cp", kafka_jars(), f"org.apache.kafka.tools.consumer.{tool}",
            "--bootstrap-server", bootstrap, "--topic", topic, "--group", group_id,
            *(arg for prop in properties for arg in ("--command-property", prop)),
            "--command-property", f"metadata.max.age.ms={refresh_ms}",
            "--command-property", f"client.id={group_id}-java",
            "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
        ]
        super().__init__(command, grace=15)


class JavaConsoleConsumer(_PrintingJavaTool):
    """Kafka's own console consumer: an independent client that refreshes
    metadata on its own timer (``metadata.max.age.ms``). Without
    ``--from-beginning`` a new group starts at latest. Auto-commit is left at
    the client's defaults (on, every 5 s, with ``--group``)."""

    def __init__(self, bootstrap: str, group_id: str, topic: str, *, protocol: str,
                 refresh_ms: int = 5000, earliest: bool = False, assignor: str = "") -> None:
        super().__init__("ConsoleConsumer", bootstrap, group_id, topic, refresh_ms=refresh_ms,
                         properties=(f"group.protocol={protocol}",
                                     *(["auto.offset.reset=earliest"] if earliest else []),
                                     *([f"partition.assignment.strategy={assignor}"] if assignor else [])))


class JavaConsoleShareConsumer(_PrintingJavaTool):
    """Kafka's own share consumer (``ConsoleShareConsumer``, KIP-932) in share
    group ``group_id``: the coordinator assigns it partitions, and it starts a
    partition the group has not initialised where the group's
    ``share.auto.offset.reset`` says (``latest`` by default). Records are
    acknowledged as printed."""

    def __init__(self, bootstrap: str, group_id: str, topic: str, *, refresh_ms: int = 5000) -> None:
        super().__init__("ConsoleShareConsumer", bootstrap, group_id, topic, refresh_ms=refresh_ms)


def set_share_reset(bootstrap: str, group_id: str, value: str) -> None:
    kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
               "--entity-name", group_id, "--add-config", f"share.auto.offset.reset={value}")


def share_reset(bootstrap: str, group_id: str) -> str:
    """The group's own share.auto.offset.reset as kafka-configs describes it ("" when it has none)."""
    out = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--describe", "--entity-type",
                     "groups", "--entity-name", group_id)
    for part in out.replace(",", " ").split():
        if part.startswith("share.auto.offset.reset="):
            return part.split("=", 1)[1]
    return ""


GO_CLIENTS = ("sarama", "kafka-go", "kafka-go-nowatch", "franz-go", "confluent-kafka-go")


def go_consumer_binary() -> str:
    """The Go clients' program (tests/clients/go), built by scripts/setup.sh."""
    home = os.environ.get("GAPWATCH_HOME") or os.path.join(os.path.dirname(__file__), "..", "..", ".gapwatch")
    return os.path.join(home, "bin", "gapwatch-go-consumer")


class GoClientConsumer(_PrintingClient):
    """One real Go Kafka client (``client``, one of GO_CLIENTS) as the only
    member of ``latest`` group ``group_id`` (``earliest``: of an earliest
    one), in a process of its own: no committed offset means the end (the beginning), offsets auto-committed every 5 s, metadata
    refreshed every ``refresh_ms``. sarama, kafka-go (``WatchPartitionChanges``),
    franz-go and confluent-kafka-go (librdkafka) rebalance when a refresh shows
    a new partition; ``kafka-go-nowatch`` (kafka-go's default) never does.
    kafka-go takes up to ~10 s to leave its group on SIGTERM."""

    def __init__(self, client: str, bootstrap: str, group_id: str, topic: str, *, refresh_ms: int = 5000,
                 earliest: bool = False) -> None:
        if client not in GO_CLIENTS:
            raise ValueError(f"unknown Go client {client!r}: one of {', '.join(GO_CLIENTS)}")
        binary = go_consumer_binary()
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"{binary} is missing: run scripts/setup.sh, which builds it")
        super().__init__([binary, "-client", client, "-bootstrap", bootstrap, "-group", group_id, "-topic", topic,
                          "-refresh-ms", str(refresh_ms), *(["-earliest"] if earliest else [])], grace=20)


def kafka_tool(*args: str, timeout: float = 60.0) -> str:
    """One of Kafka's command-line tools (a class in the broker's jars, run
    with ``args``); its standard output. Fails the test with its output when
    it exits non-zero."""
    command = ["java", *java_options("tools"), "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-cp", kafka_jars(), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args[0]} exited {done.returncode}: {done.stdout}{done.stderr}"
    return done.stdout


def share_groups_describe(bootstrap: str, group_id: str) -> dict[tuple[str, int], tuple[int, int]]:
    """``kafka-share-groups --describe --group``: each partition's START-OFFSET and LAG, by the columns its
    header names."""
    out = kafka_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                     "--bootstrap-server", bootstrap, "--describe", "--group", group_id)
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next(line for line in lines if "START-OFFSET" in line)
    rows = [dict(zip(header, line, strict=False)) for line in lines[lines.index(header) + 1:]]
    return {(row["TOPIC"], int(row["PARTITION"])): (int(row["START-OFFSET"]), int(row["LAG"]))
            for row in rows if row.get("GROUP") == group_id and row.get("START-OFFSET", "-").isdigit()}


class RateProducer:
    """Produces ``rate`` messages a second to each partition in ``partitions``,
    as a steady application would; ``add`` starts writing to more partitions
    once this producer's own metadata shows them (it refreshes every second,
    ``METADATA_REFRESH``). ``tokens``: each value is one word no other record
    has (``token``), so an application that keeps only words (a Kafka Streams
    word count) still shows which records it processed; otherwise every value
    is ``x``. ``clock_skew_s``: the producer's clock is that far ahead
    (negative: behind), so every record's CreateTime is off by it (the broker
    accepts up to an hour either way by default). Every call on the producer
    is made by its own thread."""

    # librdkafka refreshes the metadata of the topics it knows this often (its default: 5 minutes).
    METADATA_REFRESH = {"topic.metadata.refresh.interval.ms": 1000}

    def __init__(self, bootstrap: str, topic: str, *, rate: float, partitions: list[int],
                 clock_skew_s: float = 0.0, tokens: bool = False) -> None:
        self.topic = topic
        self.producer = self._make_producer(bootstrap)
        self.rate = rate
        self.clock_skew_s = clock_skew_s
        self.tokens = tokens
        self._written: dict[int, int] = defaultdict(int)
        self.partitions = list(partitions)  # written to; only the producer's thread changes it
        self._adding: list[int] = []  # asked for by ``add``, not yet in its metadata
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _make_producer(self, bootstrap: str) -> Producer:
        # linger.ms 50 (librdkafka's default is 5): at 50 records a second a request carries a few
        # records of each partition rather than one. 25 producers at once (test_pickup) cost the broker
        # 31 CPU s rather than 51, and themselves 65 rather than 87; a record still lands within 50 ms.
        return Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **self.METADATA_REFRESH})

    def add(self, partitions: list[int]) -> None:
        """Writes to ``partitions`` too once this producer's metadata shows them
        (its thread tries every tick; librdkafka refuses a partition it does
        not know yet at once). ``writes`` says when it does."""
        self._adding = sorted(set(self._adding) | set(partitions))

    def writes(self, partitions: list[int]) -> bool:
        """Whether a record went to each of ``partitions``; raises if the producer stopped."""
        if self.failure is not None:
            raise AssertionError(f"the producer of {self.topic} stopped") from self.failure
        return set(partitions) <= set(self.partitions)

    def _open(self) -> bool:
        """Writes a first record to each partition ``add`` asked for that the
        producer's metadata now shows; True if one was."""
        opened = False
        for partition in list(self._adding):
            try:
                self._produce(partition)
            except KafkaException as error:
                if error.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                    raise
                continue  # not in its metadata yet
            self._adding.remove(partition)
            self.partitions.append(partition)
            opened = True
        return opened

    def _produce(self, partition: int) -> None:
        number = self._written[partition]
        value = token(partition, number).encode() if self.tokens else b"x"
        if self.clock_skew_s:
            stamp = int((time.time() + self.clock_skew_s) * 1000)
            self.producer.produce(self.topic, value=value, partition=partition, timestamp=stamp)
        else:
            self.producer.produce(self.topic, value=value, partition=partition)
        self._written[partition] = number + 1

    def _serve(self) -> None:
        try:
            self._run()
        except BaseException as error:  # raised by ``add``, which waits on this thread
            self.failure = error
            raise

    def _run(self) -> None:
        period = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            for partition in list(self.partitions):
                try:
                    self._produce(partition)
                except KafkaException as error:
                    # A topic created a moment ago: librdkafka's first metadata of it can still lack
                    # a partition (a full run's producer stopped on one); the next tick writes it.
                    if error.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                        raise
            if self._adding:
                self._open()
            self.producer.poll(0)
            next_at += period
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    def halt(self) -> None:
        """Stops writing; ``stop`` then waits for the thread and flushes what is queued."""
        self._stop.set()

    def stop(self) -> None:
        self.halt()
        self._thread.join(timeout=10)
        self._flush()

    def _flush(self) -> None:
        self.producer.flush(30)


def stop_all(producers: Iterable[RateProducer]) -> None:
    """Stops every producer's writing first, then each one (``stop``). Stopped one
    after another, the others kept writing through each one's flush: on a busy
    host the broker's answers slowed to seconds, and 25 producers took 120 s."""
    producers = list(producers)
    for producer in producers:
        producer.halt()
    for producer in producers:
        producer.stop()


def token(partition: int, number: int) -> str:
    """The ``number``-th value a ``RateProducer(tokens=True)`` writes to ``partition``: one word, lower case
    (a word count lowercases what it counts), found in no other record."""
    return f"p{partition}n{number}"


class TransactionalRateProducer(RateProducer):
    """A ``RateProducer`` whose records are written in transactions: each
    holds ``hold_s`` seconds of records, and every ``abort_every``-th one is
    aborted (0: all committed). The first transaction to begin once the
    producer's metadata shows the partitions ``add`` asked for holds their
    first records and is kept open ``hold_new_s`` seconds: a transaction open
    across the pickup."""

    def __init__(self, bootstrap: str, topic: str, *, rate: float, partitions: list[int], hold_s: float = 1.0,
                 hold_new_s: float = 1.0, abort_every: int = 0) -> None:
        self.hold_s, self.hold_new_s, self.abort_every = hold_s, hold_new_s, abort_every
        self.transactions = {"committed": 0, "aborted": 0}
        self.errors: list[str] = []
        # linger.ms: librdkafka 2.16's idempotent (and so transactional) producer spins its broker thread while
        # 5 records of a partition are in flight and a record waits past its linger (poll with a 0 timeout,
        # ~12,000 a second): at 50 records a second, any answer slower than 100 ms. Half a transaction keeps
        # the linger longer than the broker's answers; the commit sends what waits.
        self._producer_config = {"bootstrap.servers": bootstrap, "linger.ms": 500, **self.METADATA_REFRESH,
                                 "transactional.id": f"{topic}-tx-{uuid.uuid4().hex[:6]}"}
        super().__init__(bootstrap, topic, rate=rate, partitions=partitions)

    def _flush(self) -> None:
        try:
            self.producer.flush(30)
        except KafkaException as error:  # a producer a fatal error ended: said in ``errors``, not raised
            self.errors.append(str(error))

    def _make_producer(self, bootstrap: str) -> Producer:
        producer = Producer({**self._producer_config,
                             "transactional.id": f"{self._producer_config['transactional.id']}-{uuid.uuid4().hex[:4]}"})
        producer.init_transactions(30)
        return producer

    def _run(self) -> None:
        period = 1.0 / self.rate
        next_at = time.monotonic()
        self.producer.begin_transaction()
        began, hold, number, opening = time.monotonic(), self.hold_s, 1, False
        while not self._stop.is_set():
            if time.monotonic() - began >= hold:
                try:
                    self._end(number)
                except KafkaException as error:
                    if not error.args[0].fatal():
                        raise
                    # A fatal error (seen under load: INVALID_TXN_STATE ending a transaction whose
                    # commit timed out): that producer is done; a new one, with a new id, goes on.
                    self.errors.append(str(error))
                    self.producer = self._make_producer(self._producer_config["bootstrap.servers"])
                number += 1
                self.producer.begin_transaction()
                began, hold, opening = time.monotonic(), self.hold_s, True
            try:
                # A transaction's first records go to a partition ``add`` asked for, once the
                # producer's metadata shows it: that transaction is kept open ``hold_new_s``.
                if opening and self._adding and self._open():
                    hold = self.hold_new_s
                opening = False
                for partition in self.partitions:
                    self._produce(partition)
            except KafkaException as error:
                # The transaction failed (e.g. a partition not yet known to its
                # coordinator right after it was added): abort it, begin another.
                self.errors.append(str(error))
                try:
                    if error.args[0].fatal():
                        raise error
                    self._abort()
                except KafkaException as fatal:
                    if not fatal.args[0].fatal():
                        raise
                    self.producer = self._make_producer(self._producer_config["bootstrap.servers"])
                self.producer.begin_transaction()
                began = time.monotonic()
            self.producer.poll(0)
            next_at += period
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        self._end(number)

    def _end(self, number: int) -> None:
        if not self.abort_every or number % self.abort_every:
            try:
                self._patiently(self.producer.commit_transaction)
                self.transactions["committed"] += 1
                return
            except KafkaException as error:
                if not error.args[0].txn_requires_abort():
                    raise
                self.errors.append(str(error))
        self._abort()

    def _abort(self) -> None:
        self._patiently(self.producer.abort_transaction)
        self.transactions["aborted"] += 1

    def _patiently(self, finish) -> None:
        """Commit or abort, called again while it fails with a retriable error
        (a busy broker: "failed to flush all outstanding messages within the
        API timeout"), as librdkafka's transactional API asks, for 2 minutes."""
        deadline = time.monotonic() + 120
        while True:
            try:
                finish(10)
                return
            except KafkaException as error:
                if error.args[0].fatal() or not error.args[0].retriable() or time.monotonic() > deadline:
                    raise
                self.errors.append(str(error))
                self.producer.poll(0.1)


def group_committed(admin: AdminClient, group_id: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The group's committed offsets on ``partitions`` as the broker answers them (-1001: none)."""
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p) for p in partitions])
    answer = admin.list_consumer_group_offsets([request])[group_id].result(timeout=30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def never_consumed(received: list[int], *, log_start: int, end: int) -> int:
    """How many offsets in ``[log_start, end)`` the client never received (the truth of a gap)."""
    return len(set(range(log_start, end)) - set(received))


class Ticker:
    """Calls ``tick`` every ``interval`` seconds in a thread, as celery beat
    would enqueue the watcher; errors are kept and raised by ``close``."""

    def __init__(self, tick, *, interval: float = 1.0) -> None:
        self.tick = tick
        self.interval = interval
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except BaseException as error:  # noqa: BLE001 - reported by close()
                self.errors.append(error)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.errors:
            raise self.errors[0]
