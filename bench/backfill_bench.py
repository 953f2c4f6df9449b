"""Backfill benchmark: 1,000,000 records of 200 bytes in one partition, and
the same spread over 8 partitions. Not a test.

    source scripts/env.sh && .venv/bin/python bench/backfill_bench.py [--records N] [--runs R] [--keep] [--no-cluster]

Side by side on the same ranges, in the same run:

- ``kcat -C -b B -t T [-p P] -o 0 -c N -e -q > /dev/null``: the single-reader reference;
- on a Spark Connect server this bench starts (``python -m adapters.spark.connect``
  on ``local[*]``, 1g driver, a token of the bench's own), already warm:
  - the job's own read (``read_ranges`` with ``kafka_options``, the job's
    split, into Spark's ``noop`` sink): the steady state (median of reads
    after WARMUP_READS unmeasured ones, in one session), and a new job's
    first read (a new session on the warm server, then its first read);
  - the real backfill job end to end (``tasks.backfill.run_backfill``,
    Parquet sink, verification and publish included), as the executor runs
    it on a server (``ConnectJob``);
- the same job in a Spark process of its own (``spark_connect=""``);
- the same reads and job on a Connect server whose master is a standalone
  cluster on loopback (a Master and 2 Workers of 1 core and 1g each,
  ``tests.harness.processes.SparkStandalone``).

Also: the fixed cost of a job (a 1-record backfill end to end) on the warm
servers and in a process of its own, the first job on a freshly started
server (cold JVM), and the memory of each stack: VmRSS of the process trees
(the Connect server's JVM and its children; the standalone master, workers
and their executors), sampled every MEMORY_INTERVAL seconds.

Targets: the Connect warm steady-state read at least 0.5x kcat's speed; a
1-record job on the warm local server at most 2 s end to end.

``--big`` (issue 35) measures only the real-size table: per ``--partitions``
layout of ``--records`` values of ``--value-bytes``, and per ``--sinks``
(``parquet``, ``kafka``: the replay topic, ``handler``: ``bench.handlers.drain``),
the reference and the whole verified job on one warm local Connect server
(1g driver) in the same run: kcat for Parquet and the handler, ``kcat -C |
kcat -P`` into a fresh topic with the replay producer's settings for the
replay topic; each stage, records/s, MB/s, the server's CPU seconds, disk
bytes and peak memory per job; then the fixed cost (median of 5 1-record
Parquet jobs) and the server's memory after ``--idle`` seconds. Targets:
Parquet >= 0.3x kcat, replay >= 0.5x kcat's copy, fixed cost <= 1 s, memory
back within 20% of ready.

    .venv/bin/python bench/backfill_bench.py --big --records 10000000 --partitions 1,12,48 \
        --sinks parquet,kafka,handler --runs 1

Topics ``bench.backfill.p1`` and ``bench.backfill.p8`` are created once and
deleted at the end unless ``--keep``. Every process the bench starts runs in
a process group of its own, is killed at the end (also on errors), and dies
with the bench if the bench is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from django.conf import settings  # noqa: E402

from groups.domain.planning import BackfillRange  # noqa: E402
from groups.domain.sinks import HANDLER, KAFKA, PARQUET  # noqa: E402
from tasks.backfill.runner import RECORDS_PER_TASK, BackfillRequest, run_backfill  # noqa: E402
from adapters.kafka.adapter import ClusterConfig, KafkaAdapter  # noqa: E402
from adapters.spark.backfill_job import session_parallelism  # noqa: E402
from adapters.spark.connect import connect_session  # noqa: E402
from adapters.spark.reader import kafka_options, read_ranges  # noqa: E402
from adapters.spark.sinks.kafka import REPLAY_PRODUCER  # noqa: E402
from adapters.spark.spec import JobSpec, KafkaSecrets, KafkaSettings, SinkSpec  # noqa: E402
from adapters.spark.warm_up import WARM_UP_RECORDS, warm_up_kafka, warm_up_source  # noqa: E402
# Plain modules (no pytest): a standalone master and workers from the pyspark
# install, and the Connect server the tests start.
from tests.harness.processes import SparkStandalone, descendants, process_children  # noqa: E402
from tests.harness.connect import READY_LINE, ConnectServer  # noqa: E402

VALUE_BYTES = 200
# The handler of the handler-sink rows: pulls every record, keeps none.
DRAIN_HANDLER = "bench.handlers.drain"
# Unmeasured reads in a session before the measured ones (the JIT settles
# over several reads); then STEADY_READS measured reads per run.
WARMUP_READS = 5
STEADY_READS = 5
# Unmeasured jobs on a server before each layout's measured ones.
WARMUP_JOBS = 2
SERVER_MEMORY = "1g"
CLUSTER_WORKERS = 2
CLUSTER_WORKER_MEMORY = "1g"
# spark-defaults.conf of the Connect server on the standalone cluster: an
# executor takes its worker's core and memory; the server waits for every
# executor before it says it started; a task never waits for a preferred
# executor (the Kafka source prefers one executor per Kafka partition).
CLUSTER_CLIENT_CONF = {
    "spark.executor.memory": CLUSTER_WORKER_MEMORY,
    "spark.executor.cores": "1",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
    "spark.locality.wait": "0",
}
SERVER_START_SECONDS = 180
MEMORY_INTERVAL = 0.5
TARGET_READ_VS_KCAT = 0.5
TARGET_FIXED_SECONDS = 2.0


def prepare(admin: AdminClient, bootstrap: str, topic: str, partitions: int, records: int,
            value_bytes: int = VALUE_BYTES) -> None:
    """Idempotent: the topic with ``records`` values of ``value_bytes``, spread evenly."""
    adapter = KafkaAdapter(ClusterConfig(bootstrap))
    if topic in admin.list_topics(timeout=10).topics:
        offsets = adapter.partition_offsets(topic=topic, partitions=list(range(partitions)))
        if sum(o.high_watermark - o.log_start for o in offsets.values()) == records:
            return
        admin.delete_topics([topic])[topic].result(timeout=60)
        while topic in admin.list_topics(timeout=10).topics:
            time.sleep(0.5)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(timeout=60)
    time.sleep(2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    payload = (os.urandom(value_bytes // 2 + 1).hex().encode())[:value_bytes]
    for number in range(records):
        while True:
            try:
                producer.produce(topic, key=b"key-%d" % number, value=payload, partition=number % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        if number % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def time_kcat(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    command = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "0", "-c", str(records), "-e", "-q"]
    if partitions == 1:
        command[6:6] = ["-p", "0"]
    started = time.monotonic()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True, timeout=600)
    return time.monotonic() - started


def replay_topic(topic: str) -> str:
    return f"{topic}.replay"


def copy_topic(topic: str) -> str:
    return f"{topic}.kcat-copy"


def time_kcat_copy(admin: AdminClient, bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """The replay's reference: ``kcat -C ... | kcat -P ...`` into a fresh
    topic of as many partitions (keys and values, each record's partition by
    its key), with the replay producer's settings (REPLAY_PRODUCER)."""
    copy = copy_topic(topic)
    recreate_topic(admin, copy, partitions)
    consume = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "0", "-c", str(records), "-e", "-q",
               "-K", "\t"]
    if partitions == 1:
        consume[6:6] = ["-p", "0"]
    produce = ["kcat", "-P", "-b", bootstrap, "-t", copy, "-K", "\t"]
    for key, value in REPLAY_PRODUCER.items():
        produce += ["-X", f"{key}={value}"]
    started = time.monotonic()
    reader = subprocess.Popen(consume, stdout=subprocess.PIPE)
    writer = subprocess.run(produce, stdin=reader.stdout, check=False, timeout=1800)
    reader.stdout.close()
    assert reader.wait(timeout=60) == 0 and writer.returncode == 0, (reader.returncode, writer.returncode)
    seconds = time.monotonic() - started
    copied = sum(o.high_watermark for o in KafkaAdapter(ClusterConfig(bootstrap)).partition_offsets(
        topic=copy, partitions=list(range(partitions))).values())
    assert copied == records, f"kcat copied {copied} of {records} records"
    admin.delete_topics([copy])[copy].result(timeout=60)
    return seconds


def recreate_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    if topic in admin.list_topics(timeout=10).topics:
        admin.delete_topics([topic])[topic].result(timeout=60)
        while topic in admin.list_topics(timeout=10).topics:
            time.sleep(0.5)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(timeout=60)


def median(values: list[float]) -> float:
    return statistics.median(values)


def say(message: str) -> None:
    """Progress of the run (the results come at the end)."""
    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", flush=True)


# -- processes --------------------------------------------------------------------------------


def connect_server(workdir: Path, name: str, *, master: str, extra_env: dict | None = None) -> ConnectServer:
    """The tests' Connect server with the bench's driver memory (SERVER_MEMORY)
    and patience (SERVER_START_SECONDS), logging to ``connect-<name>.log``;
    the bench ends it with ``shut_down`` (its driver leaves a cluster cleanly)."""
    return ConnectServer(workdir / f"connect-{name}.log", master=master, driver_memory=SERVER_MEMORY,
                         extra_env=extra_env, start_timeout=SERVER_START_SECONDS)


def standalone_cluster(workdir: Path) -> SparkStandalone:
    """A standalone master and CLUSTER_WORKERS workers (1 core and
    CLUSTER_WORKER_MEMORY each) on loopback, started (closed on failure)."""
    cluster = SparkStandalone(workdir, workers=CLUSTER_WORKERS, memory=CLUSTER_WORKER_MEMORY)
    try:
        return cluster.start()
    except BaseException:
        cluster.close()
        raise


def cluster_client_env(workdir: Path) -> dict:
    """The environment of the Connect server on the cluster: its own
    spark-defaults.conf (CLUSTER_CLIENT_CONF), on loopback."""
    conf_dir = workdir / "connect-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in CLUSTER_CLIENT_CONF.items()))
    return {"SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}


# -- memory -----------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    """VmRSS of one process (0 if it is gone or has none, like a zombie)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def local_parts(server: ConnectServer) -> Callable[[], dict[str, int]]:
    def parts() -> dict[str, int]:
        children = process_children()
        return {"Connect server (JVM and children)":
                sum(rss_kib(pid) for pid in [server.pid, *descendants(server.pid, children)])}
    return parts


def cluster_parts(server: ConnectServer, cluster: SparkStandalone) -> Callable[[], dict[str, int]]:
    def parts() -> dict[str, int]:
        children = process_children()
        workers = [process.pid for process in cluster.workers.values()]
        return {
            "Connect server = driver (JVM and children)":
                sum(rss_kib(pid) for pid in [server.pid, *descendants(server.pid, children)]),
            "standalone master": sum(rss_kib(pid) for pid in [cluster.master.pid,
                                                              *descendants(cluster.master.pid, children)]),
            f"standalone workers ({len(workers)} daemons)": sum(rss_kib(pid) for pid in workers),
            "executors (children of the workers)":
                sum(rss_kib(pid) for worker in workers for pid in descendants(worker, children)),
        }
    return parts


class MemorySampler(threading.Thread):
    """VmRSS of a stack's parts (KiB), every MEMORY_INTERVAL seconds: the
    first sample, the peak of each part and of their sum, the last sample."""

    def __init__(self, parts: Callable[[], dict[str, int]]) -> None:
        super().__init__(name="bench-memory", daemon=True)
        self.parts = parts
        self.first = parts()
        self.last = dict(self.first)
        self.peak = dict(self.first)
        self.peak_total = sum(self.first.values())
        self.stopped = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopped.wait(MEMORY_INTERVAL):
            self.sample()

    def sample(self) -> None:
        current = self.parts()
        self.last = current
        for name, kib in current.items():
            self.peak[name] = max(self.peak.get(name, 0), kib)
        self.peak_total = max(self.peak_total, sum(current.values()))

    def finish(self) -> dict:
        self.stopped.set()
        self.join(timeout=5)
        self.sample()
        mib = 1024
        return {"parts": {name: {"ready": self.first.get(name, 0) / mib, "peak": self.peak[name] / mib,
                                 "end": self.last.get(name, 0) / mib} for name in self.peak},
                "total": {"ready": sum(self.first.values()) / mib, "peak": self.peak_total / mib,
                          "end": sum(self.last.values()) / mib}}


# -- what is measured -------------------------------------------------------------------------


def read_spec(bootstrap: str, topic: str, partitions: int, records: int, workdir: str) -> JobSpec:
    """The spec a job of this range gets (its split included); the sink is unused."""
    per_partition = records // partitions
    return JobSpec(job_id="bench-read", attempt="read", kafka=KafkaSettings(bootstrap),
                   ranges=tuple(BackfillRange(topic, p, 0, per_partition) for p in range(partitions)),
                   sink=SinkSpec("parquet", output=workdir), jars_dir=str(settings.SPARK_KAFKA_JARS_DIR),
                   records_per_task=RECORDS_PER_TASK, progress_file=f"{workdir}/progress.json",
                   result_file=f"{workdir}/result.json")


def noop_read(spark, spec: JobSpec, parallelism: int) -> float:
    """The job's read of the ranges into Spark's noop sink; seconds."""
    begin = time.monotonic()
    read_ranges(spark, spec, kafka_options(spec.kafka, ""), parallelism=parallelism) \
        .write.format("noop").mode("overwrite").save()
    return time.monotonic() - begin


def time_steady_reads(server: ConnectServer, spec: JobSpec, measured: int) -> list[float]:
    """In one session: WARMUP_READS unmeasured reads, then ``measured`` ones."""
    spark = connect_session(server.url, token=server.token)
    try:
        parallelism = session_parallelism(spark)
        for _ in range(WARMUP_READS):
            noop_read(spark, spec, parallelism)
        return [noop_read(spark, spec, parallelism) for _ in range(measured)]
    finally:
        spark.stop()


def time_first_read(server: ConnectServer, spec: JobSpec) -> dict:
    """A new job's first read: a new session on the (warm) server, as a job
    opens it (``connect_session``, its parallelism), then one read."""
    begin = time.monotonic()
    spark = connect_session(server.url, token=server.token)
    try:
        parallelism = session_parallelism(spark)
        session = time.monotonic() - begin
        read = noop_read(spark, spec, parallelism)
    finally:
        spark.stop()
    return {"session": session, "read": read, "total": session + read}


def run_job(bootstrap: str, topic: str, partitions: int, records: int, master: str, output: str,
            server: ConnectServer | None = None, sink: str = PARQUET) -> dict:
    """One backfill job end to end to ``sink`` (Parquet; the replay topic
    ``replay_topic(topic)``; or the handler ``DRAIN_HANDLER``); on ``server``
    if given, else in its own process."""
    per_partition = records // partitions
    result = run_backfill(BackfillRequest(
        run_id=f"bench-{topic}-{records}", cluster=ClusterConfig(bootstrap), sink=sink, output=output,
        replay_topics={topic: replay_topic(topic)} if sink == KAFKA else {},
        handler=DRAIN_HANDLER if sink == HANDLER else "",
        ranges=tuple(BackfillRange(topic, p, 0, per_partition) for p in range(partitions)),
        master=master, timeout_seconds=3600,
        spark_connect=server.url if server else "", spark_connect_token=server.token if server else ""))
    assert result["delivered"] == per_partition * partitions, result
    attempts = result["attempts"]
    assert len(attempts) == 1 and attempts[0]["mode"] == ("connect" if server else "process"), attempts
    return {**result["timings"], "total": result["seconds"], "verified_by": result.get("verified_by", "")}


def medians(jobs: list[dict]) -> dict:
    return {key: median([job[key] for job in jobs]) for key in jobs[0] if not isinstance(jobs[0][key], str)}


def measure_server(label: str, server: ConnectServer, layouts: list[tuple[str, int]], args, output: str,
                   kcat: dict[str, list[float]] | None = None) -> dict:
    """On a started server: the first job (cold JVM), then per layout kcat
    (if ``kcat`` is given, into it), the steady and first reads, the jobs;
    then the fixed cost of a 1-record job."""
    stack: dict = {"server_startup": server.startup, "layouts": {}}
    say(f"{label}: server ready in {server.startup:.1f}s; first job on it (cold JVM)")
    stack["first_job"] = run_job(args.bootstrap, layouts[0][0], layouts[0][1], args.records, args.master, output,
                                 server)
    for topic, partitions in layouts:
        spec = read_spec(args.bootstrap, topic, partitions, args.records, output)
        if kcat is not None:
            say(f"{topic}: kcat x{args.runs}")
            kcat[topic] = [time_kcat(args.bootstrap, topic, partitions, args.records) for _ in range(args.runs)]
        say(f"{label} {topic}: {WARMUP_READS} warm-up + {args.runs * STEADY_READS} steady reads")
        steady = time_steady_reads(server, spec, args.runs * STEADY_READS)
        say(f"{label} {topic}: new session + first read x{args.runs}")
        first = [time_first_read(server, spec) for _ in range(args.runs)]
        say(f"{label} {topic}: {WARMUP_JOBS} warm-up + {args.runs} jobs")
        for _ in range(WARMUP_JOBS):
            run_job(args.bootstrap, topic, partitions, args.records, args.master, output, server)
        jobs = [run_job(args.bootstrap, topic, partitions, args.records, args.master, output, server)
                for _ in range(args.runs)]
        stack["layouts"][topic] = {
            "steady_read": median(steady), "first_read": medians(first), "job": medians(jobs),
            "raw": {"steady_reads": steady, "first_reads": first, "jobs": jobs},
        }
    say(f"{label}: 1 warm-up + {args.runs} 1-record jobs")
    run_job(args.bootstrap, layouts[0][0], 1, 1, args.master, output, server)
    tiny = [run_job(args.bootstrap, layouts[0][0], 1, 1, args.master, output, server) for _ in range(args.runs)]
    stack["fixed_cost"] = medians(tiny)
    stack["raw_fixed_cost"] = tiny
    return stack


# -- the report -------------------------------------------------------------------------------


def print_report(report: dict, layouts: list[tuple[str, int]], runs: int) -> None:
    n = report["records"]
    local, cluster, own = report["local"], report.get("cluster"), report["own_process"]
    cluster_name = f"standalone ({CLUSTER_WORKERS} workers x 1 core)"
    targets = []
    print(f"\nMedians of {runs} run{'s' if runs > 1 else ''}; a warm server's steady state: median of "
          f"{runs * STEADY_READS} reads in one session after {WARMUP_READS} unmeasured ones; jobs on a server after "
          f"{WARMUP_JOBS} unmeasured ones; kcat measured beside the local server.")
    for topic, partitions in layouts:
        kcat = report["kcat"][topic]
        header = (f"{partitions} partition (`-p 0`)" if partitions == 1
                  else f"{partitions} partitions (kcat without `-p`)")
        print(f"\n| {header}, {n:,} records | seconds | records/s | vs kcat |\n|---|---|---|---|")

        def row(name: str, seconds: float, throughput: bool = True) -> None:
            rate = f"{n / seconds:,.0f}" if throughput else ""
            versus = f"{kcat / seconds:.2f}" if throughput else ""
            print(f"| {name} | {seconds:.2f} | {rate} | {versus} |")

        row("`kcat -C -t T" + (" -p 0" if partitions == 1 else "") + " -o 0 -c N -e -q > /dev/null`", kcat)
        stacks = [("Connect local[*]", local)] + ([(f"Connect {cluster_name}", cluster)] if cluster else [])
        for label, stack in stacks:
            data = stack["layouts"][topic]
            row(f"**{label}: read, warm server (steady state)**", data["steady_read"])
            first = data["first_read"]
            row(f"{label}: a new job's first read (new session {first['session']:.2f} s + read "
                f"{first['read']:.2f} s)", first["total"])
            row(f"{label}: job, read + write Parquet", data["job"]["write"])
            row(f"{label}: job, verify (read Parquet back, exact counts)", data["job"]["verify"], throughput=False)
            row(f"{label}: whole job", data["job"]["total"])
        own_jobs = own["layouts"][topic]
        row("job in its own process: read + write Parquet", own_jobs["write"])
        row("job in its own process: whole job, start-up included", own_jobs["total"])
        startups = [f"{label} {stack['layouts'][topic]['job']['startup']:.2f} s" for label, stack in stacks]
        print(f"\nStart-up to a ready session (job's spawn to its session): {', '.join(startups)}, "
              f"own process {own_jobs['startup']:.2f} s.")
        for label, stack in stacks:
            ratio = kcat / stack["layouts"][topic]["steady_read"]
            targets.append((f"{label}, read on a warm server (steady state) >= {TARGET_READ_VS_KCAT}x kcat, {topic}",
                            f"{ratio:.2f}x", ratio >= TARGET_READ_VS_KCAT))

    print(f"\n| fixed cost of a job: 1-record backfill end to end (Kafka checks included), median of {runs} "
          f"| whole job | start-up "
          f"| read + write | verify | explain/publish |\n|---|---|---|---|---|---|")
    for label, fixed in [("Connect local[*], warm server", local["fixed_cost"])] + (
            [(f"Connect {cluster_name}, warm server", cluster["fixed_cost"])] if cluster else []) + [
            ("own process", own["fixed_cost"])]:
        print(f"| {label} | {fixed['total']:.2f} s | {fixed['startup']:.2f} s | {fixed['write']:.2f} s "
              f"| {fixed['verify']:.2f} s | {fixed.get('finish', 0):.2f} s |")
    targets.append((f"fixed cost of a 1-record job on the warm local server <= {TARGET_FIXED_SECONDS:.0f} s",
                    f"{local['fixed_cost']['total']:.2f} s", local["fixed_cost"]["total"] <= TARGET_FIXED_SECONDS))

    topic = layouts[0][0]
    for label, stack in [("local[*]", local)] + ([(cluster_name, cluster)] if cluster else []):
        first = stack["first_job"]
        print(f"\nConnect {label}: server start {stack['server_startup']:.1f} s (spawn to \"{READY_LINE}\"); "
              f"first job on it (cold JVM, {n:,} records, {topic}): {first['total']:.2f} s "
              f"(read + write {first['write']:.2f} s, verify {first['verify']:.2f} s)")

    print("\n| memory, VmRSS of the process trees (MiB) | ready | peak | end |\n|---|---|---|---|")
    for label, stack in [("local[*]", local)] + ([(cluster_name, cluster)] if cluster else []):
        memory = stack["memory"]
        for name, values in memory["parts"].items():
            print(f"| {label}: {name} | {values['ready']:.0f} | {values['peak']:.0f} | {values['end']:.0f} |")
        if len(memory["parts"]) > 1:
            total = memory["total"]
            print(f"| **{label}: whole stack** | {total['ready']:.0f} | {total['peak']:.0f} | {total['end']:.0f} |")

    print("\nTargets:")
    for label, value, met in targets:
        print(f"- {label}: {value}, {'met' if met else 'NOT MET'}")

# -- real size (issue 35): --big ---------------------------------------------------------------

# The whole verified job against its reference (issue 35): kcat for Parquet,
# kcat's copy for the replay topic; the handler sink has none.
TARGET_BIG_VS_REFERENCE = {PARQUET: 0.3, KAFKA: 0.5}
FIXED_COST_JOBS = 5
TARGET_BIG_FIXED_SECONDS = 1.0
TARGET_MEMORY_BACK = 0.2
# After the last job, the server idles this long (its Kafka consumer caches
# expire after 30 s) before its "end" memory is read.
IDLE_SECONDS = 45
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_counters(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) and bytes written to disk by a process and
    its living descendants, from /proc. The CPU of descendants that exited
    (the handler sink's Python workers) is counted once their parent reaped
    them (its cutime and cstime); their disk bytes are not."""
    cpu = written = 0.0
    for member in [pid, *descendants(pid, process_children())]:
        try:
            with open(f"/proc/{member}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            cpu += sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
            with open(f"/proc/{member}/io") as io:
                for line in io:
                    if line.startswith("write_bytes:"):
                        written += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return {"cpu": cpu, "written": written}


def stack_counters(roots: list[int]) -> dict[str, float]:
    counters = [tree_counters(pid) for pid in roots]
    return {"cpu": sum(c["cpu"] for c in counters), "written": sum(c["written"] for c in counters)}


def counted_job(server: ConnectServer, sampler: MemorySampler, roots: list[int], **job) -> dict:
    """``run_job`` on ``server`` with the CPU seconds and disk bytes written
    of the process trees of ``roots`` (the server; with a standalone cluster
    also its master and workers) and the stack's peak memory (MiB) during
    the job."""
    before = stack_counters(roots)
    overall, sampler.peak_total = sampler.peak_total, 0
    timings = run_job(server=server, **job)
    after = stack_counters(roots)
    peak, sampler.peak_total = sampler.peak_total, max(overall, sampler.peak_total)
    return {**timings, "cpu_seconds": after["cpu"] - before["cpu"], "disk_bytes": after["written"] - before["written"],
            "peak_mib": peak / 1024}


def warm_up_read(server: ConnectServer, bootstrap: str, output: str) -> str:
    """The warm-up's second job, as ``manage.py warm_spark_connect`` runs it
    on a registered cluster (the harness's warm-up runs the first only): the
    newest records of the fullest partition of the bench's broker."""
    source = warm_up_source(KafkaAdapter(ClusterConfig(bootstrap)), records=WARM_UP_RECORDS, timeout=10)
    spark = connect_session(server.url, token=server.token)
    try:
        result = warm_up_kafka(spark, output, kafka=KafkaSettings(bootstrap), secrets=KafkaSecrets(), source=source,
                               jars_dir=str(settings.SPARK_KAFKA_JARS_DIR))
    finally:
        spark.stop()
    assert result["status"] == "discarded", result
    return f"{sum(p['delivered'] for p in result['partitions']):,} records of {source.topic}[{source.partition}]"


def big_run(args, admin: AdminClient, workdir: Path, output: str, servers: list, clusters: list) -> dict:
    """The real-size table: per layout (``--partitions``) of ``--records`` values
    of ``--value-bytes``, kcat (and, for the replay topic, kcat's copy) and
    the whole verified job per sink (``--sinks``) on a warm local Connect
    server (1g driver: on local[*] the executors are the driver's threads,
    so the whole job runs in 1 GiB of heap), in the same run; then the fixed
    cost of a 1-record job and the server's memory."""
    layouts = [(f"bench.backfill.big.p{p}.v{args.value_bytes}", p) for p in args.partitions]
    for topic, partitions in layouts:
        say(f"preparing {topic}: {args.records:,} records of {args.value_bytes} B")
        prepare(admin, args.bootstrap, topic, partitions, args.records, args.value_bytes)
    report: dict = {"records": args.records, "value_bytes": args.value_bytes, "rows": [],
                    "load_before": os.getloadavg()}
    if args.standalone:
        say(f"standalone cluster: master + {CLUSTER_WORKERS} workers")
        cluster = standalone_cluster(workdir / "standalone")
        clusters.append(cluster)
        server = connect_server(workdir, "big", master=cluster.url, extra_env=cluster_client_env(workdir))
        servers.append(server)
        sampler = MemorySampler(cluster_parts(server, cluster))
        roots = [server.pid, cluster.master.pid, *(worker.pid for worker in cluster.workers.values())]
        report["master"] = f"standalone ({CLUSTER_WORKERS} workers x 1 core, {CLUSTER_WORKER_MEMORY})"
    else:
        server = connect_server(workdir, "big", master=args.master)
        servers.append(server)
        sampler = MemorySampler(local_parts(server))
        roots = [server.pid]
        report["master"] = f"{args.master} ({SERVER_MEMORY})"
    report["server_startup"] = server.startup
    if args.warm_up:
        # The server as scripts/app.sh leaves it: warmed by manage.py warm_spark_connect. Its memory
        # before the warm-up is kept beside; "ready" is after it and the same idle as the end's.
        report["memory_before_warm_up"] = sum(sampler.first.values()) / 1024
        warmed = time.monotonic()
        say(server.warm_up(Path(output)))
        report["warm_up_kafka"] = warm_up_read(server, args.bootstrap, output)
        say(f"warm-up, its Kafka read: {report['warm_up_kafka']}")
        report["warm_up_seconds"] = time.monotonic() - warmed
        # Ready as the end is read: after the same idle (the idle collection gives the warm-up's heap back).
        say(f"idle {args.idle} s after the warm-up, then the server's ready memory")
        time.sleep(args.idle)
        sampler.finish()
        sampler = MemorySampler(sampler.parts)
    report["memory_ready"] = sampler.first
    report["first_big_records"] = first_big = min(args.records, 1_000_000)
    say(f"warm-up: two 1-record jobs and one job of {first_big:,} records per sink")
    report["first_jobs"] = [run_job(args.bootstrap, layouts[0][0], 1, 1, args.master, output, server)["total"]
                            for _ in range(2)]
    report["first_big_jobs"] = {
        sink: run_job(args.bootstrap, layouts[0][0], layouts[0][1], first_big, args.master, output, server,
                      sink=sink)["total"]
        for sink in args.sinks}
    for topic, partitions in layouts:
        say(f"{topic}: kcat x{args.runs}")
        kcat = [time_kcat(args.bootstrap, topic, partitions, args.records) for _ in range(args.runs)]
        for sink in args.sinks:
            reference = kcat
            if sink == KAFKA:
                say(f"{topic}: kcat -C | kcat -P x{args.runs}")
                reference = [time_kcat_copy(admin, args.bootstrap, topic, partitions, args.records)
                             for _ in range(args.runs)]
            jobs = []
            for run in range(args.runs):
                say(f"{topic} -> {sink}: job {run + 1} of {args.runs}")
                jobs.append(counted_job(server, sampler, roots, bootstrap=args.bootstrap, topic=topic,
                                        partitions=partitions, records=args.records, master=args.master,
                                        output=output, sink=sink))
                say(f"{topic} -> {sink}: job {run + 1}: {jobs[-1]}")
            report["rows"].append({"topic": topic, "partitions": partitions, "sink": sink,
                                   "reference": median(reference), "reference_raw": reference,
                                   "job": medians(jobs), "raw": jobs, "verified_by": jobs[-1]["verified_by"],
                                   "load": os.getloadavg()})
    say(f"fixed cost: 1 warm-up + {FIXED_COST_JOBS} 1-record jobs")
    run_job(args.bootstrap, layouts[0][0], 1, 1, args.master, output, server)
    tiny = [run_job(args.bootstrap, layouts[0][0], 1, 1, args.master, output, server)
            for _ in range(FIXED_COST_JOBS)]
    report["fixed_cost"] = medians(tiny)
    report["raw_fixed_cost"] = tiny
    say(f"idle {args.idle} s, then the server's memory")
    time.sleep(args.idle)
    report["memory"] = sampler.finish()
    report["idle"] = args.idle
    report["load_after"] = os.getloadavg()
    if not args.keep:
        for topic, _ in layouts:
            for name in (topic, replay_topic(topic)):
                if name in admin.list_topics(timeout=10).topics:
                    admin.delete_topics([name])[name].result(timeout=60)
    return report


REFERENCES = {PARQUET: "kcat", KAFKA: "kcat -C \\| kcat -P", HANDLER: "kcat"}


def print_big(report: dict) -> None:
    n, size = report["records"], report["value_bytes"]
    megabytes = n * size / 1e6
    print(f"\n{n:,} records of {size} B ({megabytes:,.0f} MB of values), Connect on {report['master']}, "
          f"load average before {report['load_before'][0]:.1f}, after {report['load_after'][0]:.1f}\n")
    print("| partitions | sink | reference | whole job | vs reference | records/s | MB/s | start-up | read + write "
          "| verify | explain + publish | rest (Kafka checks) | verified by | server CPU s | disk written "
          "| peak memory | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    targets = []
    for row in report["rows"]:
        job, reference = row["job"], row["reference"]
        stages = job.get("startup", 0) + job.get("write", 0) + job.get("verify", 0) + job.get("finish", 0)
        ratio = reference / job["total"]
        print(f"| {row['partitions']} | {row['sink']} | {REFERENCES[row['sink']]} {reference:.2f} s "
              f"| **{job['total']:.2f} s** | **{ratio:.2f}x** "
              f"| {n / job['total']:,.0f} | {megabytes / job['total']:.0f} | {job.get('startup', 0):.2f} s "
              f"| {job.get('write', 0):.2f} s | {job.get('verify', 0):.2f} s | {job.get('finish', 0):.2f} s "
              f"| {job['total'] - stages:.2f} s | {row['verified_by']} | {job['cpu_seconds']:.0f} "
              f"| {job['disk_bytes'] / 1e9:.2f} GB | {job['peak_mib']:,.0f} MiB | {row['load'][0]:.1f} |")
        target = TARGET_BIG_VS_REFERENCE.get(row["sink"])
        if target:
            targets.append((f"whole verified job >= {target}x {REFERENCES[row['sink']]}, {row['sink']}, "
                            f"{row['partitions']} partition(s)", f"{ratio:.2f}x", ratio >= target))
    fixed = report["fixed_cost"]
    print(f"\nFixed cost, a 1-record Parquet job on the warm server (median of {len(report['raw_fixed_cost'])}): "
          f"**{fixed['total']:.2f} s** (start-up {fixed.get('startup', 0):.2f}, read + write "
          f"{fixed.get('write', 0):.2f}, verify {fixed.get('verify', 0):.2f}, explain + publish "
          f"{fixed.get('finish', 0):.2f}; runs {[round(t['total'], 2) for t in report['raw_fixed_cost']]})")
    targets.append((f"fixed cost <= {TARGET_BIG_FIXED_SECONDS:.0f} s", f"{fixed['total']:.2f} s",
                    fixed["total"] <= TARGET_BIG_FIXED_SECONDS))
    for name, values in report["memory"]["parts"].items():
        if len(report["memory"]["parts"]) > 1:
            print(f"\n{name}: ready {values['ready']:,.0f} MiB, peak {values['peak']:,.0f} MiB, "
                  f"end {values['end']:,.0f} MiB")
    memory = report["memory"]["total"]
    back = memory["end"] / memory["ready"] - 1
    print(f"\nThe server's first jobs (the bench's own warm-up): 1 record {report['first_jobs'][0]:.2f} s, then "
          f"{report['first_jobs'][1]:.2f} s; then {report['first_big_records']:,} records "
          + ", ".join(f"{sink} {seconds:.2f} s" for sink, seconds in report["first_big_jobs"].items()))
    if "memory_before_warm_up" in report:
        print(f"\nWarmed by manage.py warm_spark_connect (and its Kafka read: {report['warm_up_kafka']}) in "
              f"{report['warm_up_seconds']:.1f} s: VmRSS "
              f"{report['memory_before_warm_up']:,.0f} MiB before it; ready below is after it and {report['idle']} s idle "
              f"(the end is {memory['end'] / report['memory_before_warm_up'] - 1:+.0%} of the memory before it)")
    print(f"\nThe stack's memory (VmRSS of the process trees): ready {memory['ready']:,.0f} MiB, peak "
          f"{memory['peak']:,.0f} MiB, end {memory['end']:,.0f} MiB after {report['idle']} s idle "
          f"({back:+.0%} of ready)")
    targets.append((f"memory back within {TARGET_MEMORY_BACK:.0%} of ready", f"{back:+.0%}", back <= TARGET_MEMORY_BACK))
    print("\nTargets:")
    for label, value, met in targets:
        print(f"- {label}: {value}, {'met' if met else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[*]", help="of the local Connect server and own-process jobs")
    parser.add_argument("--no-cluster", action="store_true", help="skip the standalone cluster")
    parser.add_argument("--keep", action="store_true", help="keep the bench topics for the next run")
    parser.add_argument("--big", action="store_true",
                        help="the real-size table only (issue 35): the reference and the whole job per --partitions and --sinks")
    parser.add_argument("--partitions", type=lambda text: [int(p) for p in text.split(",")], default=[1, 12],
                        help="with --big: the layouts, comma-separated partition counts")
    parser.add_argument("--value-bytes", type=int, default=VALUE_BYTES, help="with --big")
    parser.add_argument("--standalone", action="store_true",
                        help=f"with --big: the Connect server's master is a standalone cluster of {CLUSTER_WORKERS} "
                             f"workers (1 core, {CLUSTER_WORKER_MEMORY} each) on loopback, not --master")
    parser.add_argument("--sinks", type=lambda text: text.split(","), default=[PARQUET],
                        help=f"with --big: comma-separated, of {PARQUET}, {KAFKA} (the replay topic), {HANDLER}")
    parser.add_argument("--warm-up", action="store_true",
                        help="with --big: warm the server first (manage.py warm_spark_connect, as scripts/app.sh does)"
                             "; ready is then after the warm-up")
    parser.add_argument("--idle", type=int, default=IDLE_SECONDS,
                        help="with --big: seconds the server idles before its end memory is read")
    args = parser.parse_args()
    unknown = set(args.sinks) - set(REFERENCES)
    if unknown:
        parser.error(f"--sinks: no sink {', '.join(sorted(unknown))}; the sinks are {', '.join(REFERENCES)}")
    if not shutil.which("kcat"):
        sys.exit("kcat is missing: apt-get install kcat")
    # A SIGTERM runs the clean-up below like an error would.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    if args.big:
        workdir = Path(tempfile.mkdtemp(prefix="gapwatch-backfill-bench-"))
        servers: list[ConnectServer] = []
        clusters: list[SparkStandalone] = []
        try:
            report = big_run(args, admin, workdir, str(workdir / "output"), servers, clusters)
            print_big(report)
            print("\n" + json.dumps(report))
        finally:
            for server in servers:
                server.shut_down()
            for cluster in clusters:
                cluster.close()
            shutil.rmtree(workdir, ignore_errors=True)
        return
    layouts = [("bench.backfill.p1", 1), ("bench.backfill.p8", 8)]
    began = time.monotonic()
    for topic, partitions in layouts:
        prepare(admin, args.bootstrap, topic, partitions, args.records)
    print(f"prepared in {time.monotonic() - began:.1f}s; load average {os.getloadavg()[0]:.2f}; "
          f"{os.cpu_count()} cores; master {args.master}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="gapwatch-backfill-bench-"))
    output = str(workdir / "output")
    report: dict = {"records": args.records, "runs": args.runs, "master": args.master, "kcat_raw": {}}
    servers: list[ConnectServer] = []
    cluster: SparkStandalone | None = None
    sampler: MemorySampler | None = None
    try:
        # 1. Connect on local[*]: kcat beside it, then the same jobs in their own processes.
        server = connect_server(workdir, "local", master=args.master)
        servers.append(server)
        sampler = MemorySampler(local_parts(server))
        report["local"] = measure_server("Connect local", server, layouts, args, output, kcat=report["kcat_raw"])
        report["local"]["memory"] = sampler.finish()
        sampler = None
        report["kcat"] = {topic: median(seconds) for topic, seconds in report["kcat_raw"].items()}
        server.shut_down()
        own: dict = {"layouts": {}}
        for topic, partitions in layouts:
            say(f"own process {topic}: {args.runs} jobs")
            jobs = [run_job(args.bootstrap, topic, partitions, args.records, args.master, output)
                    for _ in range(args.runs)]
            own["layouts"][topic] = {**medians(jobs), "raw": jobs}
        say(f"own process: {args.runs} 1-record jobs")
        tiny = [run_job(args.bootstrap, layouts[0][0], 1, 1, args.master, output) for _ in range(args.runs)]
        own["fixed_cost"] = medians(tiny)
        own["raw_fixed_cost"] = tiny
        report["own_process"] = own

        # 2. Connect on a standalone cluster on loopback.
        if not args.no_cluster:
            say(f"standalone cluster: master + {CLUSTER_WORKERS} workers")
            cluster = standalone_cluster(workdir / "standalone")
            server = connect_server(workdir, "standalone", master=cluster.url,
                                   extra_env=cluster_client_env(workdir))
            servers.append(server)
            sampler = MemorySampler(cluster_parts(server, cluster))
            report["cluster"] = measure_server("Connect standalone", server, layouts, args, output)
            report["cluster"]["master_url"] = cluster.url
            report["cluster"]["memory"] = sampler.finish()
            sampler = None

        print(f"\nload average after: {os.getloadavg()[0]:.2f}; whole run {time.monotonic() - began:.0f} s")
        print_report(report, layouts, args.runs)
        print("\n" + json.dumps(report))
    finally:
        if sampler is not None:
            sampler.stopped.set()
        for server in servers:
            server.shut_down()
        if cluster is not None:
            cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
        if not args.keep:
            for topic, _ in layouts:
                try:
                    admin.delete_topics([topic])[topic].result(timeout=60)
                except Exception:  # noqa: BLE001 - best-effort cleanup
                    pass


if __name__ == "__main__":
    main()
