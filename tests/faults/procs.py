"""Real service processes of a fault test's own, on free loopback ports, to
kill and restart at will without touching the shared stack of `make test`.

- ``KafkaCluster``: 1 or 3 KRaft nodes (each broker and controller) from the
  Maven jars that scripts/setup.sh installs.
- ``RedisServer``: a redis-server.
- ``Postgres``: a PostgreSQL cluster of its own (initdb in a temporary folder).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from confluent_kafka.admin import AdminClient

ROOT = Path(__file__).resolve().parents[2]
GAPWATCH_HOME = Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch"))


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies, even by
    an abort, so no broker outlives the test that started it.

    The signal follows the *thread* that started the child: a process started
    from a short-lived thread is killed when that thread ends. Start and
    restart processes from the test's main thread only."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_ports(count: int) -> list[int]:
    sockets, ports = [], []
    for _ in range(count):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        sockets.append(probe)
        ports.append(probe.getsockname()[1])
    for probe in sockets:
        probe.close()
    return ports


def wait_for(predicate, *, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except Exception:  # noqa: BLE001 - a service still starting answers with errors
            result = None
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class KafkaCluster:
    """``nodes`` combined broker+controller KRaft nodes with a static quorum."""

    def __init__(self, workdir: Path, *, nodes: int = 1, heap: str = "256m") -> None:
        self.workdir, self.nodes, self.heap = workdir, nodes, heap
        ports = free_ports(2 * nodes)
        self.broker_ports, self.controller_ports = ports[:nodes], ports[nodes:]
        self.processes: dict[int, subprocess.Popen] = {}
        self.libs = GAPWATCH_HOME / "lib" / "kafka"
        assert self.libs.is_dir(), f"Kafka jars missing in {self.libs} (run scripts/setup.sh)"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.broker_ports)

    def node_bootstrap(self, node_id: int) -> str:
        return f"127.0.0.1:{self.broker_ports[node_id - 1]}"

    def _java(self, *args: str) -> list[str]:
        return ["java", "-Xms64m", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}", "-cp", f"{self.libs}/*", *args]

    def _write_config(self, node_id: int) -> Path:
        index = node_id - 1
        voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(self.controller_ports))
        replication = min(3, self.nodes)
        data = self.workdir / f"node{node_id}"
        data.mkdir(parents=True, exist_ok=True)
        path = self.workdir / f"server{node_id}.properties"
        path.write_text("\n".join([
            "process.roles=broker,controller",
            f"node.id={node_id}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker_ports[index]},"
            f"CONTROLLER://127.0.0.1:{self.controller_ports[index]}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.broker_ports[index]}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"controller.quorum.voters={voters}",
            f"log.dirs={data}",
            "num.partitions=1",
            f"default.replication.factor={replication}",
            f"offsets.topic.replication.factor={replication}",
            "offsets.topic.num.partitions=4",
            f"transaction.state.log.replication.factor={replication}",
            "transaction.state.log.min.isr=1",
            f"share.coordinator.state.topic.replication.factor={replication}",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            # A stopped node's partitions get a new leader quickly.
            "controller.quorum.election.timeout.ms=1000",
            "controller.quorum.fetch.timeout.ms=2000",
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "",
        ]))
        return path

    def start(self) -> "KafkaCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.properties").write_text(
            "status = warn\nappender.file.type = File\nappender.file.name = file\n"
            f"appender.file.fileName = {self.workdir}/kafka.log\n"
            "appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.file.ref = file\n"
        )
        cluster_id = subprocess.run(self._java("kafka.tools.StorageTool", "random-uuid"), check=True,
                                    capture_output=True, text=True, timeout=120).stdout.strip().splitlines()[-1]
        for node_id in range(1, self.nodes + 1):
            config = self._write_config(node_id)
            subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
                           check=True, capture_output=True, timeout=120)
        for node_id in range(1, self.nodes + 1):
            self.start_node(node_id, wait=False)
        self.wait_ready()
        return self

    def start_node(self, node_id: int, *, wait: bool = True) -> None:
        log = open(self.workdir / f"node{node_id}.out", "ab")  # noqa: SIM115 - owned by the process
        self.processes[node_id] = subprocess.Popen(
            self._java("kafka.Kafka", str(self.workdir / f"server{node_id}.properties")),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
        )
        if wait:
            wait_for(lambda: _port_open(self.broker_ports[node_id - 1]), timeout=120, what=f"Kafka node {node_id}")
            self.wait_ready()

    def wait_ready(self, timeout: float = 120) -> None:
        """Every running node is registered and serves metadata."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        running = {n for n, p in self.processes.items() if p.poll() is None}
        wait_for(lambda: {b.id for b in admin.list_topics(timeout=5).brokers.values()} >= running,
                 timeout=timeout, what=f"Kafka nodes {sorted(running)} to serve metadata")

    def stop_node(self, node_id: int, *, kill: bool = False) -> None:
        process = self.processes.pop(node_id, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

    def pause_node(self, node_id: int) -> None:
        os.killpg(self.processes[node_id].pid, signal.SIGSTOP)

    def resume_node(self, node_id: int) -> None:
        os.killpg(self.processes[node_id].pid, signal.SIGCONT)

    def close(self) -> None:
        for node_id in list(self.processes):
            self.stop_node(node_id, kill=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


class RedisServer:
    def __init__(self) -> None:
        self.port = free_ports(1)[0]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        wait_for(client.ping, timeout=15, what=f"redis-server on port {self.port}")
        return self

    def start_again(self) -> "RedisServer":
        """The same port again (its data is gone: Redis here keeps nothing on disk)."""
        return self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


class Postgres:
    """A PostgreSQL cluster of its own; as root, it runs as the postgres user."""

    def __init__(self) -> None:
        # Not under pytest's tmp_path: the postgres user cannot enter root's 0700 folders.
        self.workdir = Path(tempfile.mkdtemp(prefix="gapwatch-faults-pg-"))
        self.port = free_ports(1)[0]
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        assert bins, "PostgreSQL is not installed (run scripts/setup.sh)"
        self.bin = bins[-1]
        self.url = f"postgresql://gapwatch:gapwatch@127.0.0.1:{self.port}/gapwatch"

    def _as_pg(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=True, capture_output=True, timeout=120, **kwargs)

    def start(self) -> "Postgres":
        data = self.workdir / "data"
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.workdir, "postgres")
                shutil.chown(data, "postgres")
            self._as_pg("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
            self._pg_ctl("start")
            for statement in ("create role gapwatch login createdb password 'gapwatch'",
                              "create database gapwatch owner gapwatch"):
                self._as_pg("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-c", statement)
            return self
        self._pg_ctl("start")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.workdir} -c fsync=off"
        self._as_pg("pg_ctl", "-D", str(self.workdir / "data"), "-l", str(self.workdir / "postgres.log"),
                    "-w", "-t", "60", action, *extra, "-o", options)

    def stop(self) -> None:
        if (self.workdir / "data" / "postmaster.pid").exists():
            self._as_pg("pg_ctl", "-D", str(self.workdir / "data"), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
