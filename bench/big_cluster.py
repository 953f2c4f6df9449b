"""A real multi-broker Kafka cluster on loopback for the big-cluster bench (issue 24).

    .venv/bin/python -m bench.big_cluster start [--brokers 6]
    .venv/bin/python -m bench.big_cluster populate [--partitions 60000] [--groups 3000] [--no-keep]
    .venv/bin/python -m bench.big_cluster status
    .venv/bin/python -m bench.big_cluster measure [--runs 3] [--live 20:20]
    .venv/bin/python -m bench.big_cluster stop [--wipe]

One KRaft controller process (node 0, port base+100) and N broker processes
(nodes 1..N, ports base..base+N-1), all from the broker jars `scripts/setup.sh`
installs, with data and logs under ``.gapwatch/bigcluster``. A broker keeps
about one file open per partition under this machine's limit of 20,000 per
process: six brokers hold 60k partitions at ~10k each, half their limit. The
controller runs on its own so that it shares neither its open files nor its
heap with a broker's 10k partitions.

Every step is idempotent: ``start`` reuses running processes and the data on
disk, ``populate`` creates only the topics, records and group commits that are
missing (``keep=False`` deletes this module's topics and groups first, to time
their creation again). ``stop`` leaves the data for the next ``start`` unless
told to wipe it.

The cluster's topics are ``big.t0000``... (16, 20 and 24 partitions in turn, 3
records in each partition); its groups ``big.g0000``... each commit on every
partition of one topic, every fourth group on a second topic too.
``live_members`` runs classic and KIP-848 consumers in some of those groups,
in a process of their own, for as long as a bench needs them.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.harness.kafka_clients import GroupConsumer, kafka_jars, wait_until

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = Path(os.environ.get("GAPWATCH_HOME") or REPO_ROOT / ".gapwatch") / "bigcluster"
BASE_PORT = 19092
CONTROLLER_NODE_ID = 0
BROKER_HEAP = "768m"
CONTROLLER_HEAP = "512m"

TOPIC_PREFIX = "big.t"
GROUP_PREFIX = "big.g"
PARTITION_CYCLE = (16, 20, 24)
RECORDS_PER_PARTITION = 3
# The controller refuses one CreateTopics of ~1,000+ topics ("excessively large
# batch"); 200 topics of at most 24 partitions stay well under it.
TOPICS_PER_CREATE = 200
# Admin offset commits are one group per call: this many calls in flight at once.
COMMITS_IN_FLIGHT = 200


# ---------------------------------------------------------------- the processes


@dataclass(frozen=True)
class Node:
    name: str
    node_id: int
    port: int

    @property
    def is_controller(self) -> bool:
        return self.node_id == CONTROLLER_NODE_ID


class BigCluster:
    """The controller and brokers under ``home``: their configs, storage and processes."""

    def __init__(self, home: Path = DEFAULT_HOME, *, n_brokers: int = 6, base_port: int = BASE_PORT) -> None:
        self.home = Path(home)
        self.n_brokers = n_brokers
        self.base_port = base_port
        self.controller = Node("controller", CONTROLLER_NODE_ID, base_port + 100)
        self.brokers = [Node(f"broker-{n}", n, base_port + n - 1) for n in range(1, n_brokers + 1)]

    @property
    def nodes(self) -> list[Node]:
        return [self.controller, *self.brokers]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.brokers)

    def _dir(self, node: Node) -> Path:
        return self.home / node.name

    def _pid_file(self, node: Node) -> Path:
        return self.home / "run" / f"{node.name}.pid"

    def pid(self, node: Node) -> int | None:
        """The node's running JVM, or None. A pid is believed only while its
        command line still names this node's config (pids are reused)."""
        try:
            pid = int(self._pid_file(node).read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if str(self._dir(node) / "server.properties").encode() in cmdline else None

    def _write_config(self, node: Node) -> None:
        directory = self._dir(node)
        (directory / "data").mkdir(parents=True, exist_ok=True)
        common = [
            f"node.id={node.node_id}",
            f"controller.quorum.voters={CONTROLLER_NODE_ID}@127.0.0.1:{self.controller.port}",
            "controller.listener.names=CONTROLLER",
            f"log.dirs={directory / 'data'}",
        ]
        if node.is_controller:
            roles = [
                "process.roles=controller",
                f"listeners=CONTROLLER://127.0.0.1:{node.port}",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
            ]
        else:
            roles = [
                "process.roles=broker",
                f"listeners=PLAINTEXT://127.0.0.1:{node.port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "offsets.topic.replication.factor=1",
                # 3,000 groups over six brokers' coordinators.
                "offsets.topic.num.partitions=50",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "auto.create.topics.enable=false",
                # Each partition's active segment maps an offset and a time index
                # of this size (default 10 MiB): 10k partitions map 20k of them.
                "log.index.size.max.bytes=1048576",
                # Loading and closing 10k logs at start and stop, in parallel.
                "num.recovery.threads.per.data.dir=4",
                # Six brokers loading 60k partitions on two cores keep the controller
                # busy for minutes; the default (60 s) made a broker give up and exit.
                "initial.broker.registration.timeout.ms=600000",
            ]
        (directory / "server.properties").write_text("\n".join(roles + common) + "\n")
        logs = self.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (directory / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {logs / node.name}.log\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = file\n"
            "logger.kafka.name = kafka\n"
            "logger.kafka.level = WARN\n"
            "logger.apache.name = org.apache.kafka\n"
            "logger.apache.level = WARN\n"
            # One INFO line per partition made or led: 20k lines a broker when topics are created.
            "logger.state.name = state.change.logger\n"
            "logger.state.level = WARN\n"
        )

    def _java(self, node: Node, main: str, *args: str) -> list[str]:
        heap = CONTROLLER_HEAP if node.is_controller else BROKER_HEAP
        return ["java", "-Xms128m", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
                f"-Dlog4j2.configurationFile={self._dir(node) / 'log4j2.properties'}",
                "-cp", kafka_jars(), main, *args]

    def _cluster_id(self) -> str:
        """One id for every node's storage, made once (as Kafka's Uuid.randomUuid prints one)."""
        path = self.home / "cluster-id"
        if not path.exists():
            while True:
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
                if not cluster_id.startswith("-"):
                    break
            path.write_text(cluster_id)
        return path.read_text().strip()

    def start(self) -> float:
        """Starts whatever node is not running and waits until every broker is
        registered; returns the seconds that took.

        1. Writes each node's config (a config change applies to nodes started now).
        2. Formats each node's storage once, with the cluster's one id.
        3. Starts the missing JVMs in their own sessions: they outlive this process.
        4. Waits until the cluster describes all N brokers and every partition
           on disk is served by its leader again.
        """
        begin = time.monotonic()
        (self.home / "run").mkdir(parents=True, exist_ok=True)
        cluster_id = self._cluster_id()
        formats = []
        for node in self.nodes:
            self._write_config(node)
            if self.pid(node) is None and not (self._dir(node) / "data" / "meta.properties").exists():
                formats.append(subprocess.Popen(
                    self._java(node, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                               "-c", str(self._dir(node) / "server.properties")),
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for process in formats:
            output, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                raise RuntimeError(f"Kafka storage format failed: {output}")
        started = {}
        for node in self.nodes:
            if self.pid(node) is None:
                with open(self.home / "logs" / f"{node.name}.out", "ab") as out:
                    started[node.name] = subprocess.Popen(
                        self._java(node, "kafka.Kafka", str(self._dir(node) / "server.properties")),
                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
                self._pid_file(node).write_text(str(started[node.name].pid))
        # Quiet (log_level 2): refused connections are expected until the brokers listen.
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000, "log_level": 2})

        def all_registered() -> bool:
            for name, process in started.items():
                if process.poll() is not None:
                    log = self.home / "logs" / f"{name}.out"
                    raise RuntimeError(f"{name} exited; last lines of {log}:\n"
                                       + "\n".join(log.read_text(errors="replace").splitlines()[-20:]))
            return len(admin.describe_cluster(request_timeout=5).result(timeout=10).nodes) == self.n_brokers

        wait_until(all_registered, timeout=600, interval=0.5, what=f"{self.n_brokers} registered brokers",
                   retry_on=(KafkaException,))
        # A restarted broker registers before it serves its partitions again, and one
        # still catching up may answer with the metadata it had when it stopped (every
        # partition led). Wait until the metadata lists the partitions on disk, then
        # until each partition's leader answers for it.
        on_disk = self.partitions_on_disk()
        if on_disk and started:
            def listed() -> list[TopicPartition] | None:
                topics = admin.list_topics(timeout=60).topics
                partitions = [TopicPartition(name, p) for name, topic in topics.items() for p in topic.partitions]
                return partitions if len(partitions) >= on_disk else None

            partitions = wait_until(listed, timeout=900, interval=2, what=f"the {on_disk} partitions on disk",
                                    retry_on=(KafkaException,))
            _end_offsets(admin, partitions, timeout=900)
        return time.monotonic() - begin

    def partitions_on_disk(self) -> int:
        """The brokers' partition directories (``<topic>-<n>``), not the metadata
        log's nor those of deleted topics (``<topic>-<n>.<id>-delete``)."""
        return sum(1 for node in self.brokers if (self._dir(node) / "data").is_dir()
                   for entry in (self._dir(node) / "data").iterdir()
                   if entry.is_dir() and entry.name.rsplit("-", 1)[-1].isdigit()
                   and not entry.name.startswith("__cluster_metadata-"))

    def stop(self, *, wipe: bool = False) -> float:
        """Stops the brokers (controlled shutdowns, all at once), then the
        controller; SIGKILL after 5 minutes. ``wipe`` deletes the data too."""
        begin = time.monotonic()
        for group in (self.brokers, [self.controller]):
            pids = [pid for pid in (self.pid(node) for node in group) if pid is not None]
            for pid in pids:
                os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(AssertionError):
                wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), timeout=300,
                           interval=0.5, what="the nodes to exit")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for node in self.nodes:
            self._pid_file(node).unlink(missing_ok=True)
        if wipe:
            shutil.rmtree(self.home, ignore_errors=True)
        return time.monotonic() - begin

    def resources(self) -> dict[str, dict]:
        """Each running node's pid, resident memory (MiB), open files and CPU seconds so far."""
        result = {}
        for node in self.nodes:
            pid = self.pid(node)
            if pid is None:
                continue
            status = Path(f"/proc/{pid}/status").read_text()
            rss_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
            result[node.name] = {
                "pid": pid,
                "rss_mib": rss_kib / 1024,
                "fds": len(os.listdir(f"/proc/{pid}/fd")),
                "cpu_seconds": cpu_seconds(pid),
            }
        return result


def start(n_brokers: int = 6, base_port: int = BASE_PORT, home: Path = DEFAULT_HOME) -> BigCluster:
    cluster = BigCluster(home, n_brokers=n_brokers, base_port=base_port)
    seconds = cluster.start()
    print(f"big cluster up in {seconds:.1f}s: {cluster.bootstrap} (home {cluster.home})", flush=True)
    return cluster


def stop(home: Path = DEFAULT_HOME, *, n_brokers: int = 6, base_port: int = BASE_PORT, wipe: bool = False) -> None:
    seconds = BigCluster(home, n_brokers=n_brokers, base_port=base_port).stop(wipe=wipe)
    print(f"big cluster stopped in {seconds:.1f}s" + (" and wiped" if wipe else ""), flush=True)


# ---------------------------------------------------------------- the contents


def topic_layout(partitions: int) -> list[tuple[str, int]]:
    """(name, partition count) of the topics holding ``partitions`` in all:
    16, 20 and 24 partitions in turn, the last topic taking what is left."""
    layout, total = [], 0
    while total < partitions:
        count = min(PARTITION_CYCLE[len(layout) % len(PARTITION_CYCLE)], partitions - total)
        layout.append((f"{TOPIC_PREFIX}{len(layout):04d}", count))
        total += count
    return layout


def group_names(groups: int) -> list[str]:
    return [f"{GROUP_PREFIX}{n:04d}" for n in range(groups)]


def group_topics(number: int, topics: int) -> list[str]:
    """The topics group ``number`` commits on: one, and every fourth group a second."""
    first = number % topics
    names = [f"{TOPIC_PREFIX}{first:04d}"]
    if number % 4 == 0 and topics > 1:
        names.append(f"{TOPIC_PREFIX}{(first + topics // 2) % topics:04d}")
    return names


def committed_offset(number: int, partition: int) -> int:
    """Group ``number``'s commit on a partition: 1 to 3, so lags differ."""
    return 1 + (number + partition) % RECORDS_PER_PARTITION


def _big_groups(admin: AdminClient) -> set[str]:
    listed = admin.list_consumer_groups(request_timeout=60).result(timeout=120)
    return {g.group_id for g in listed.valid if g.group_id.startswith(GROUP_PREFIX)}


def _delete_contents(admin: AdminClient) -> None:
    """Deletes this module's groups and topics and waits until the topics are gone."""
    groups = sorted(_big_groups(admin))
    for first in range(0, len(groups), 100):
        for future in admin.delete_consumer_groups(groups[first:first + 100], request_timeout=60).values():
            future.result()
    topics = sorted(t for t in admin.list_topics(timeout=60).topics if t.startswith(TOPIC_PREFIX))
    for first in range(0, len(topics), TOPICS_PER_CREATE):
        batch = topics[first:first + TOPICS_PER_CREATE]
        for future in admin.delete_topics(batch, operation_timeout=120, request_timeout=180).values():
            future.result()
    wait_until(lambda: not any(t.startswith(TOPIC_PREFIX) for t in admin.list_topics(timeout=60).topics),
               timeout=600, interval=2, what="the deleted topics to go")


def _create_topics(admin: AdminClient, layout: list[tuple[str, int]]) -> int:
    """Creates the layout's missing topics in batches; returns how many it created."""
    existing = admin.list_topics(timeout=60).topics
    wrong = [(name, len(existing[name].partitions), count) for name, count in layout
             if name in existing and len(existing[name].partitions) != count]
    if wrong:
        raise RuntimeError(f"topics exist with other partition counts (name, has, wants): {wrong[:5]}")
    missing = [(name, count) for name, count in layout if name not in existing]
    for first in range(0, len(missing), TOPICS_PER_CREATE):
        batch = [NewTopic(name, num_partitions=count, replication_factor=1)
                 for name, count in missing[first:first + TOPICS_PER_CREATE]]
        for future in admin.create_topics(batch, operation_timeout=120, request_timeout=180).values():
            future.result()
    return len(missing)


def _wait_for_leaders(admin: AdminClient, layout: list[tuple[str, int]]) -> None:
    def all_led() -> bool:
        topics = admin.list_topics(timeout=60).topics
        return all(name in topics and len(topics[name].partitions) == count
                   and all(p.leader >= 0 for p in topics[name].partitions.values())
                   for name, count in layout)

    wait_until(all_led, timeout=600, interval=2, what="a leader for every partition")


# A broker creates the logs of the partitions it leads some time after the
# controller has placed them: until then it answers with these.
NOT_SERVED_YET = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART,
                  KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_LEADER_EPOCH}


def _end_offsets(admin: AdminClient, partitions: list[TopicPartition], *,
                 timeout: float = 600) -> dict[tuple[str, int], int]:
    """Each partition's log end, asked again for the partitions not served yet."""
    ends: dict[tuple[str, int], int] = {}
    pending, deadline = partitions, time.monotonic() + timeout
    while pending:
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in pending}, request_timeout=120)
        pending = []
        for tp, future in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as error:
                if error.args[0].code() not in NOT_SERVED_YET or time.monotonic() > deadline:
                    raise
                pending.append(tp)
        if pending:
            time.sleep(2)
    return ends


def _produce(bootstrap: str, partitions: list[TopicPartition]) -> None:
    """RECORDS_PER_PARTITION records to each partition, batched by the producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 500,
                         "queue.buffering.max.messages": 1_000_000})
    failures = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error)

    for tp in partitions:
        for _ in range(RECORDS_PER_PARTITION):
            producer.produce(tp.topic, value=b"x", partition=tp.partition, on_delivery=delivered)
        producer.poll(0)
    remaining = producer.flush(300)
    if remaining or failures:
        raise RuntimeError(f"{remaining} records undelivered, {len(failures)} failed (first: {failures[:1]})")


# A group's coordinator answers these while __consumer_offsets is being made
# or loaded (the first commits of a new cluster): the commit is asked again.
COORDINATOR_NOT_READY = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                         KafkaError.COORDINATOR_NOT_AVAILABLE}


def _commit_group_offsets(admin: AdminClient, layout: list[tuple[str, int]], names: list[str], *,
                          timeout: float = 600) -> None:
    """Admin commits for the named groups, COMMITS_IN_FLIGHT calls at a time;
    the groups whose coordinator is not ready yet go again after the pass."""
    counts = dict(layout)
    pending, deadline = names, time.monotonic() + timeout
    while pending:
        retry = []
        for first in range(0, len(pending), COMMITS_IN_FLIGHT):
            futures = {}
            for name in pending[first:first + COMMITS_IN_FLIGHT]:
                number = int(name[len(GROUP_PREFIX):])
                offsets = [TopicPartition(topic, p, committed_offset(number, p))
                           for topic in group_topics(number, len(layout)) for p in range(counts[topic])]
                request = ConsumerGroupTopicPartitions(name, offsets)
                futures[name] = admin.alter_consumer_group_offsets([request], request_timeout=120)[name]
            for name, future in futures.items():
                try:
                    errors = {tp.error.code() for tp in future.result().topic_partitions if tp.error is not None}
                except KafkaException as error:  # the group's own error
                    errors = {error.args[0].code()}
                if errors and (errors - COORDINATOR_NOT_READY or time.monotonic() > deadline):
                    raise RuntimeError(f"group {name}: commit refused ({sorted(errors)})")
                if errors:
                    retry.append(name)
        pending = retry
        if pending:
            time.sleep(2)


def populate(bootstrap: str, partitions: int = 60_000, groups: int = 3_000, keep: bool = True) -> dict[str, float]:
    """Brings the cluster's contents to ``partitions`` and ``groups``; returns the seconds of each step.

    1. Without ``keep``: deletes this module's groups and topics first.
    2. Creates the missing topics (batched create_topics, RF 1, placed by the controller)
       and waits until every partition has a leader that serves it (answers ListOffsets).
    3. Writes RECORDS_PER_PARTITION records to each partition whose log is still empty.
    4. Commits offsets for each missing group (admin commits, one group per call, many at once).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    layout = topic_layout(partitions)
    if groups and len(layout) < 1:
        raise ValueError("groups need at least one topic")
    seconds = {}
    if not keep:
        begin = time.monotonic()
        _delete_contents(admin)
        seconds["delete"] = time.monotonic() - begin
        print(f"deleted the {TOPIC_PREFIX}* topics and {GROUP_PREFIX}* groups in {seconds['delete']:.1f}s", flush=True)
    begin = time.monotonic()
    created = _create_topics(admin, layout)
    _wait_for_leaders(admin, layout)
    seconds["topics"] = time.monotonic() - begin
    every_partition = [TopicPartition(name, p) for name, count in layout for p in range(count)]
    ends = _end_offsets(admin, every_partition)
    seconds["topics served"] = time.monotonic() - begin
    print(f"topics: {created} of {len(layout)} created ({partitions:,} partitions) in {seconds['topics']:.1f}s, "
          f"every partition served by its leader after {seconds['topics served']:.1f}s", flush=True)
    begin = time.monotonic()
    empty = [tp for tp in every_partition if ends[(tp.topic, tp.partition)] == 0]
    if empty:
        _produce(bootstrap, empty)
    seconds["records"] = time.monotonic() - begin
    print(f"records: {RECORDS_PER_PARTITION} to each of {len(empty):,} empty partitions in "
          f"{seconds['records']:.1f}s", flush=True)
    begin = time.monotonic()
    missing = sorted(set(group_names(groups)) - _big_groups(admin))
    _commit_group_offsets(admin, layout, missing)
    seconds["groups"] = time.monotonic() - begin
    print(f"groups: {len(missing)} of {groups} committed in {seconds['groups']:.1f}s", flush=True)
    return seconds


# ---------------------------------------------------------------- live members


def live_group_ids(classic: int, consumer: int) -> tuple[list[str], list[str]]:
    """The groups live members join: the first single-topic groups, classic ones first."""
    single = (n for n in itertools.count() if n % 4 != 0)
    names = [f"{GROUP_PREFIX}{n:04d}" for n in itertools.islice(single, classic + consumer)]
    return names[:classic], names[classic:]


def _run_live_members(bootstrap: str, topics: int, classic: int, consumer: int) -> None:
    """The child process of ``live_members``: one consumer per group, until SIGTERM.
    Prints "ready" once every member holds an assignment."""
    stop_event = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
    classic_ids, consumer_ids = live_group_ids(classic, consumer)
    members = [
        GroupConsumer(bootstrap, group_id, group_topics(int(group_id[len(GROUP_PREFIX):]), topics)[0],
                      offset_reset="earliest", protocol=protocol, commit_interval_ms=5000)
        for protocol, ids in (("classic", classic_ids), ("consumer", consumer_ids)) for group_id in ids
    ]
    try:
        wait_until(lambda: all(m.assigned for m in members) or stop_event.is_set(), timeout=300,
                   what="every live member's assignment")
        print("ready", flush=True)
        parent = os.getppid()
        while not stop_event.wait(1) and os.getppid() == parent:
            pass  # a bench killed outright leaves no members behind
    finally:
        for member in members:
            member.close()


@dataclass(frozen=True)
class LiveMembers:
    classic_groups: list[str]
    consumer_groups: list[str]
    pid: int


@contextlib.contextmanager
def live_members(bootstrap: str, *, topics: int, classic: int = 20, consumer: int = 20):
    """``classic`` classic-protocol and ``consumer`` KIP-848 confluent-kafka
    consumers, one per group, in a process of their own (not the bench's GIL);
    yields a LiveMembers once all hold their partitions, and makes them leave on exit.
    ``topics`` is the number of topics ``populate`` made (which topic a group reads)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.big_cluster", "live", "--bootstrap", bootstrap, "--topics", str(topics),
         "--live", f"{classic}:{consumer}"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"live members did not start (exit {process.poll()}): {line!r}")
        yield LiveMembers(*live_group_ids(classic, consumer), pid=process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---------------------------------------------------------------- measurements


def cli_describe_all(bootstrap: str) -> float:
    """Seconds for `kafka-consumer-groups --describe --all-groups`, JVM start included."""
    begin = time.monotonic()
    subprocess.run(
        ["java", "-Xmx512m", "-cp", kafka_jars(), "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
         "--bootstrap-server", bootstrap, "--describe", "--all-groups"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return time.monotonic() - begin


def list_topics_cost(bootstrap: str) -> tuple[float, float, int]:
    """(wall seconds, this process's CPU seconds, partitions) of one full
    ``list_topics`` from a fresh AdminClient (its connections included)."""
    wall, cpu = time.monotonic(), time.process_time()
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=120)
    partitions = sum(len(t.partitions) for t in metadata.topics.values())
    return time.monotonic() - wall, time.process_time() - cpu, partitions


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def cpu_use(processes: dict[str, int], seconds: float = 10.0) -> dict[str, float]:
    """Each named process's CPU use over ``seconds``, in percent of one core."""
    before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    time.sleep(seconds)
    return {name: 100 * (cpu_seconds(pid) - before[name]) / seconds for name, pid in processes.items()}


def leaders_per_broker(bootstrap: str) -> Counter:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=120)
    return Counter(p.leader for t in metadata.topics.values() for p in t.partitions.values())


def print_status(cluster: BigCluster) -> None:
    resources = cluster.resources()
    for node in cluster.nodes:
        r = resources.get(node.name)
        where = f"127.0.0.1:{node.port}"
        print(f"{node.name:12} {where:16} " + (
            f"pid {r['pid']:>7}  rss {r['rss_mib']:7.0f} MiB  open files {r['fds']:6}  cpu {r['cpu_seconds']:8.1f}s"
            if r else "down"))
    if any(node.name in resources for node in cluster.brokers):
        leaders = leaders_per_broker(cluster.bootstrap)
        print("partitions led: " + ", ".join(f"broker {b}: {n:,}" for b, n in sorted(leaders.items())))


def measure(cluster: BigCluster, *, runs: int, topics: int, classic: int, consumer: int) -> None:
    """Prints the nodes' resources, their CPU use idle and with live members,
    and the cost of a full list_topics and of Kafka's describe-all CLI."""
    print_status(cluster)
    nodes = {name: r["pid"] for name, r in cluster.resources().items()}
    print("idle CPU over 10 s (% of one core): " + ", ".join(
        f"{name} {share:.1f}" for name, share in cpu_use(nodes).items()), flush=True)
    for _ in range(runs):
        wall, cpu, partitions = list_topics_cost(cluster.bootstrap)
        print(f"list_topics: {partitions:,} partitions in {wall:.3f}s wall, {cpu:.3f}s CPU", flush=True)
    with contextlib.ExitStack() as stack:
        if classic + consumer:
            live = stack.enter_context(live_members(cluster.bootstrap, topics=topics, classic=classic,
                                                    consumer=consumer))
            print(f"{classic} classic and {consumer} KIP-848 live members joined; CPU over 10 s: " + ", ".join(
                f"{name} {share:.1f}" for name, share in cpu_use({**nodes, "live members": live.pid}).items()),
                flush=True)
        for _ in range(runs):
            print(f"ConsumerGroupCommand --describe --all-groups: {cli_describe_all(cluster.bootstrap):.2f}s",
                  flush=True)


# ---------------------------------------------------------------- command line


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.big_cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "populate", "status", "measure", "stop", "live"])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--base-port", type=int, default=BASE_PORT)
    parser.add_argument("--partitions", type=int, default=60_000)
    parser.add_argument("--groups", type=int, default=3_000)
    parser.add_argument("--keep", action=argparse.BooleanOptionalAction, default=True,
                        help="populate: reuse the topics and groups that exist (default); --no-keep remakes them")
    parser.add_argument("--wipe", action="store_true", help="stop: delete the data as well")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--live", default="20:20", help="classic:KIP-848 live members (measure, live)")
    parser.add_argument("--bootstrap", help="live: the cluster's bootstrap servers")
    parser.add_argument("--topics", type=int, help="live: how many topics populate made")
    args = parser.parse_args()
    classic, consumer = (int(n) for n in args.live.split(":"))
    if args.action == "live":
        _run_live_members(args.bootstrap, args.topics, classic, consumer)
        return
    cluster = BigCluster(args.home, n_brokers=args.brokers, base_port=args.base_port)
    if args.action == "start":
        start(args.brokers, args.base_port, args.home)
    elif args.action == "populate":
        begin = time.monotonic()
        populate(cluster.bootstrap, args.partitions, args.groups, keep=args.keep)
        print(f"populated in {time.monotonic() - begin:.1f}s", flush=True)
    elif args.action == "status":
        print_status(cluster)
    elif args.action == "measure":
        measure(cluster, runs=args.runs, topics=len(topic_layout(args.partitions)), classic=classic,
                consumer=consumer)
    elif args.action == "stop":
        stop(args.home, n_brokers=args.brokers, base_port=args.base_port, wipe=args.wipe)


if __name__ == "__main__":
    main()
