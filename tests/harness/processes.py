"""Real service processes of a fault test's own, on free loopback ports, to
kill and restart at will without touching the shared stack of `make test`.

- ``KafkaCluster``: 1 or 3 KRaft nodes (each broker and controller) from the
  Maven jars that scripts/setup.sh installs: the local broker's release, or
  an older one of the release matrix.
- ``RedisServer``: a redis-server.
- ``Postgres``: a PostgreSQL cluster of its own (initdb in a temporary folder).
- ``SparkStandalone``: a Spark master and workers from the pyspark install.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple
from urllib.request import urlopen

import pyspark
import redis
from confluent_kafka.admin import AdminClient

from tests.harness.class_archives import java_options
from tests.harness.kafka_clients import wait_until

ROOT = Path(__file__).resolve().parents[2]
GAPWATCH_HOME = Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch"))


def _die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In the child before exec: send it ``sig`` (SIGKILL unless told) when the
    test process dies, even by an abort, so no broker outlives the test that
    started it. A child whose script forwards TERM to its own child (Keycloak's
    kc.sh) asks for SIGTERM: ``functools.partial(_die_with_parent, signal.SIGTERM)``.

    The signal follows the *thread* that started the child: a process started
    from a short-lived thread is killed when that thread ends. Start and
    restart processes from the test's main thread only."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def process_children() -> dict[int, list[int]]:
    """Every process's children, by parent pid, from /proc now."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    return children


def descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    """The pids below ``pid`` in ``children`` (``process_children``), at any depth."""
    found, pending = [], list(children.get(pid, []))
    while pending:
        child = pending.pop()
        found.append(child)
        pending.extend(children.get(child, []))
    return found


# Servers get ports below the kernel's ephemeral range (ip_local_port_range), where
# no outgoing connection takes its local port: a server stopped and started again on
# its port (a Redis or a Kafka node of a fault test) found it taken by a client's
# connection in a CI run, and never came back.
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
SERVER_PORTS = 10_000


def server_port_range() -> range:
    """The ``SERVER_PORTS`` ports just below the ephemeral range."""
    try:
        first_ephemeral = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768  # Linux's default
    return range(max(1024, first_ephemeral - SERVER_PORTS), first_ephemeral)


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nothing listens on, picked at random in
    ``server_port_range()``."""
    sockets, ports = [], []
    try:
        for port in random.sample(server_port_range(), len(server_port_range())):
            if len(ports) == count:
                break
            probe = socket.socket()
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                probe.close()
                continue
            sockets.append(probe)
            ports.append(port)
    finally:
        for probe in sockets:
            probe.close()
    assert len(ports) == count, f"only {len(ports)} free ports in {server_port_range()}"
    return ports


def end_processes(processes: list[subprocess.Popen], *, grace: float = 30) -> None:
    """SIGTERM to every process first, so they shut down side by side; then
    each gets ``grace`` seconds to exit before a SIGKILL."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()


def random_cluster_id() -> str:
    """What ``StorageTool random-uuid`` prints (Kafka's ``Uuid.randomUuid``:
    16 random bytes, URL-safe base64 without padding, never starting with
    '-'), without starting a JVM for it."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _ended_or_killed(process: subprocess.Popen) -> None:
    """Wait up to a minute for a node asked to stop, then kill its process group."""
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


class KafkaCluster:
    """``nodes`` combined broker+controller KRaft nodes with a static quorum,
    from the local broker's jars (``$GAPWATCH_HOME/lib/kafka``) or, with
    ``release``, from that release's (``lib/kafka-releases/<release>``, one
    line of third_party/maven/kafka-release/releases). 3.x brokers log through
    log4j 1, 4.x through Log4j2."""

    def __init__(self, workdir: Path, *, nodes: int = 1, heap: str = "256m", release: str | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.workdir, self.nodes, self.heap, self.release = workdir, nodes, heap, release
        # Broker settings of the test's own (e.g. group.max.size), added to the ones below.
        self.settings = dict(settings or {})
        ports = free_ports(2 * nodes)
        self.broker_ports, self.controller_ports = ports[:nodes], ports[nodes:]
        self.processes: dict[int, subprocess.Popen] = {}
        self.libs = GAPWATCH_HOME / "lib" / ("kafka" if release is None else f"kafka-releases/{release}")
        assert self.libs.is_dir(), f"Kafka jars missing in {self.libs} (run scripts/setup.sh)"
        self.log4j1 = release is not None and int(release.split(".")[0]) < 4

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.broker_ports)

    def node_bootstrap(self, node_id: int) -> str:
        return f"127.0.0.1:{self.broker_ports[node_id - 1]}"

    def _java(self, *args: str) -> list[str]:
        logging = (f"-Dlog4j.configuration={(self.workdir / 'log4j.properties').as_uri()}" if self.log4j1
                   else f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}")
        return ["java", *java_options("broker", self.libs), "-Xms64m", f"-Xmx{self.heap}", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", logging, "-cp", f"{self.libs}/*", *args]

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
            *(f"{name}={value}" for name, value in self.settings.items()),
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
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.workdir}/kafka.log\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        cluster_id = random_cluster_id()
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
            wait_until(lambda: _port_open(self.broker_ports[node_id - 1]), timeout=120,
                       what=f"Kafka node {node_id}", retry_on=(Exception,))
            self.wait_ready()

    def wait_ready(self, timeout: float = 120) -> None:
        """Every running node is registered and serves metadata."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        running = {n for n, p in self.processes.items() if p.poll() is None}
        wait_until(lambda: {b.id for b in admin.list_topics(timeout=5).brokers.values()} >= running,
                   timeout=timeout, what=f"Kafka nodes {sorted(running)} to serve metadata", retry_on=(Exception,))

    def stop_node(self, node_id: int, *, kill: bool = False) -> None:
        process = self.processes.pop(node_id, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        _ended_or_killed(process)

    def pause_node(self, node_id: int) -> None:
        os.killpg(self.processes[node_id].pid, signal.SIGSTOP)

    def resume_node(self, node_id: int) -> None:
        os.killpg(self.processes[node_id].pid, signal.SIGCONT)

    def heal(self) -> "KafkaCluster":
        """Every node running (a paused one resumed, a stopped one started) and
        serving metadata: what the next test sharing the cluster starts from."""
        for node_id in range(1, self.nodes + 1):
            process = self.processes.get(node_id)
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGCONT)
            else:
                self.start_node(node_id, wait=False)
        self.wait_ready()
        return self

    def rest(self) -> None:
        """Every node stopped, its data kept: ``heal`` starts them again. Asked
        to stop, all at once (killed, a single node came back without the
        topics it had just created: its metadata log had not reached the disk)."""
        running = {node_id: process for node_id, process in self.processes.items() if process.poll() is None}
        for process in running.values():
            os.killpg(process.pid, signal.SIGCONT)  # a paused node could not stop
            os.killpg(process.pid, signal.SIGTERM)
        for process in running.values():
            _ended_or_killed(process)
        self.processes.clear()

    def close(self) -> None:
        for node_id in list(self.processes):
            self.stop_node(node_id, kill=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


class RedisServer:
    """A redis-server of a test's own on a free loopback port, to stop and
    start again at will; it keeps nothing on disk."""

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
        wait_until(client.ping, timeout=15, what=f"redis-server on port {self.port}", retry_on=(Exception,))
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


class TaskRun(NamedTuple):
    """One attempt of a Spark task, as an application's event log records its end."""

    stage: int
    index: int
    task_id: int
    worker: str | None
    reason: str  # "Success", "ExecutorLostFailure", ...


def spark_archive_options() -> list[str]:
    """The ``-XX:SharedArchiveFile`` option of this process's ``SPARK_SUBMIT_OPTS``
    (scripts/env.sh adds Spark's class archive there when setup made one), for
    Spark JVMs that spark-submit does not start; none if there is none."""
    return [option for option in os.environ.get("SPARK_SUBMIT_OPTS", "").split()
            if option.startswith("-XX:SharedArchiveFile=")]


class SparkStandalone:
    """A standalone Spark cluster of the tests' own on loopback: a ``Master``
    and ``workers`` ``Worker``s (1 core and ``memory`` each) started with
    ``spark-class`` from the pyspark install; daemon logs under
    ``$GAPWATCH_HOME/logs/spark-standalone``.

    Each worker runs in a process group of its own, so ``kill_worker`` takes
    its executors with it, as the loss of a machine would.

    ``client_env()`` is the environment of the cluster's clients (a job
    process, a Connect server): the cluster's client settings as ``spark.*``
    system properties in ``SPARK_SUBMIT_OPTS``, which a driver's SparkConf
    reads as it would ``spark-defaults.conf``: event logs in ``event_logs``
    (which executor ran which task), applications wait for every executor
    before their first task, and no task waits for a preferred executor, so
    a short job runs on both workers. No ``SPARK_CONF_DIR``: a configuration
    folder is the first entry of every Spark JVM's class path, and a class
    path holding a folder with files in it does not match Spark's class
    archive (``adapters/spark/class_archive.py``), which the daemons, the
    executors and the drivers all map (a cluster and a small job cost about
    17 CPU-seconds instead of 28 without it).

    With ``cores`` per worker and ``app_cores`` (``spark.cores.max``) for
    each application, applications share the cluster: 2 and 2 give each one
    an executor with 1 core on each of two workers, so a Connect server and
    a job process run side by side (the worker's ``memory`` holds both
    executors).
    """

    def __init__(self, workdir: Path, *, workers: int = 2, memory: str = "1g", daemon_heap: str = "256m",
                 cores: int = 1, app_cores: int | None = None) -> None:
        self.spark_home = Path(pyspark.__file__).parent
        self.workdir, self.memory, self.cores, self.app_cores = workdir, memory, cores, app_cores
        self.logs = GAPWATCH_HOME / "logs" / "spark-standalone"
        self.event_logs = workdir / "event-logs"
        self.master_port, self.master_webui_port = free_ports(2)
        self.url = f"spark://127.0.0.1:{self.master_port}"
        # Short-lived JVMs: C1 only starts them in about half the time; the class archive, if any.
        jvm_options = " ".join(["-XX:TieredStopAtLevel=1", *spark_archive_options()])
        self.environment = {
            **{name: value for name, value in os.environ.items() if name != "SPARK_CONF_DIR"},
            "SPARK_HOME": str(self.spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": daemon_heap, "SPARK_DAEMON_JAVA_OPTS": jvm_options,
            # A killed worker is dropped by the master at once (disconnect); this bounds the rest.
            "SPARK_MASTER_OPTS": "-Dspark.worker.timeout=15",
        }
        self.client_conf = {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.event_logs.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            "spark.locality.wait": "0",
            "spark.executor.memory": "512m",
            "spark.executor.extraJavaOptions": jvm_options,
            **({"spark.cores.max": str(app_cores)} if app_cores else {}),
        }
        self.master: subprocess.Popen | None = None
        self.workers: dict[str, subprocess.Popen] = {}  # worker name -> process
        self.worker_webui_ports: dict[str, int] = {}
        self._wanted_workers = workers
        self._started = 0

    def start(self) -> "SparkStandalone":
        for folder in (self.logs, self.event_logs):
            folder.mkdir(parents=True, exist_ok=True)
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.master_port), "--webui-port", str(self.master_webui_port))
        for _ in range(self._wanted_workers):
            self.start_worker(wait=False)
        self.wait_workers(self._wanted_workers)
        return self

    def client_env(self) -> dict[str, str]:
        """What a client of the cluster adds to its environment: ``client_conf``
        as ``-Dspark.*`` options after this process's ``SPARK_SUBMIT_OPTS``."""
        properties = " ".join(f'"-D{key}={value}"' for key, value in self.client_conf.items())
        return {"SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {properties}".strip()}

    def _spawn(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        return subprocess.Popen([str(self.spark_home / "bin" / "spark-class"), main_class, *args],
                                cwd=self.workdir, env=self.environment, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)

    def start_worker(self, *, wait: bool = True) -> str:
        """A new worker on fresh ports (a killed worker's address stays taken
        at the master until it times out); its name, ``worker<n>``."""
        self._started += 1
        name = f"worker{self._started}"
        port, webui_port = free_ports(2)
        self.worker_webui_ports[name] = webui_port
        self.workers[name] = self._spawn(
            name, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(webui_port), "--cores", str(self.cores), "--memory", self.memory,
            "--work-dir", str(self.workdir / name), self.url)
        if wait:
            self.wait_workers(len(self.workers))
        return name

    def state(self) -> dict:
        """The master's JSON status (workers, active and completed applications)."""
        with urlopen(f"http://127.0.0.1:{self.master_webui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def wait_workers(self, count: int, timeout: float = 120) -> None:
        wait_until(lambda: sum(w["state"] == "ALIVE" for w in self.state()["workers"]) == count,
                   timeout=timeout, what=f"{count} Spark workers alive at {self.url}", retry_on=(Exception,))

    def worker_of_executor(self, log_url: str) -> str | None:
        """The worker whose web UI serves an executor's log (``Log Urls`` of its event)."""
        for name, port in self.worker_webui_ports.items():
            if f"127.0.0.1:{port}/" in log_url:
                return name
        return None

    def applications(self, name: str) -> list[dict]:
        """The master's record of the applications called ``name``, oldest first."""
        state = self.state()
        return sorted((app for app in state["activeapps"] + state["completedapps"] if app["name"] == name),
                      key=lambda app: app["starttime"])

    def _events(self, app_id: str) -> list[dict]:
        """The events of an application's event log (``<app id>``, or
        ``<app id>.inprogress`` while it runs)."""
        finished = self.event_logs / app_id
        log = finished if finished.exists() else self.event_logs / f"{app_id}.inprogress"
        events = []
        for line in log.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a running application's line being written
        return events

    def _executor_worker(self, event: dict) -> str | None:
        return self.worker_of_executor(event["Executor Info"]["Log Urls"]["stderr"])

    def task_runs(self, app_id: str) -> list[TaskRun]:
        """Every task attempt of an application that ended, from its event
        log, with the worker whose executor ran it."""
        workers: dict[str, str | None] = {}
        runs = []
        for event in self._events(app_id):
            if event["Event"] == "SparkListenerExecutorAdded":
                workers[event["Executor ID"]] = self._executor_worker(event)
            elif event["Event"] == "SparkListenerTaskEnd":
                info = event["Task Info"]
                runs.append(TaskRun(stage=event["Stage ID"], index=info["Index"], task_id=info["Task ID"],
                                    worker=workers.get(info["Executor ID"]),
                                    reason=event["Task End Reason"]["Reason"]))
        return runs

    def executor_workers(self, app_id: str) -> set[str | None]:
        """The workers on which an application has an executor registered and
        not removed, from its event log."""
        live: dict[str, str | None] = {}
        for event in self._events(app_id):
            if event["Event"] == "SparkListenerExecutorAdded":
                live[event["Executor ID"]] = self._executor_worker(event)
            elif event["Event"] == "SparkListenerExecutorRemoved":
                live.pop(event["Executor ID"], None)
        return set(live.values())

    def successes_by_worker(self, app_id: str) -> dict[str | None, int]:
        """Successful tasks of an application so far, per worker."""
        counts: dict[str | None, int] = {}
        for run in self.task_runs(app_id):
            if run.reason == "Success":
                counts[run.worker] = counts.get(run.worker, 0) + 1
        return counts

    def kill_worker_running_a_task(self, name: str, *, app_id: str, after_finished: int, timeout: float) -> int:
        """SIGKILL worker ``name`` (and its executor) while its executor for
        ``app_id`` runs a task, once it has finished ``after_finished`` tasks;
        the id of the task it was running. The worker is frozen (SIGSTOP)
        while its executor's log is read, so the task is still running when
        it dies."""
        group = self.workers[name].pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running, finished = self._executor_tasks(name, app_id)
            if running and finished >= after_finished:
                os.killpg(group, signal.SIGSTOP)
                running, finished = self._executor_tasks(name, app_id)
                if running:
                    self.kill_worker(name)
                    return running[-1]
                os.killpg(group, signal.SIGCONT)
            time.sleep(0.02)
        raise AssertionError(f"{name}'s executor never ran a task after {after_finished} finished ones")

    def _executor_tasks(self, name: str, app_id: str) -> tuple[list[int], int]:
        """(ids of the tasks running, number finished) by the executors of
        worker ``name`` for ``app_id``, from their logs (``<work dir>/<app>/<executor>/stderr``)."""
        started, ended = [], set()
        for log in sorted((self.workdir / name / app_id).glob("*/stderr")):
            text = log.read_text(errors="replace")
            started += [int(tid) for tid in re.findall(r"Running task \S+ in stage \S+ \(TID (\d+)\)", text)]
            ended |= {int(tid) for tid in re.findall(r"Finished task \S+ in stage \S+ \(TID (\d+)\)", text)}
        return [tid for tid in started if tid not in ended], len(ended)

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker and its executors (its process group)."""
        process = self.workers.pop(name)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)

    def close(self) -> None:
        for process in [*self.workers.values(), self.master]:
            if process is None:
                continue
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=30)
        self.workers.clear()
