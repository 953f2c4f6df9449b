"""Gapwatch at 1k to 60k partitions on a multi-broker local cluster (issue 24).

Run with `bash bench/run.sh scale` (its own database). It starts the big
cluster of ``bench/big_cluster.py`` (six KRaft brokers on loopback) and, for
each size in ``--sizes`` (partitions:groups, growing: the cluster is brought
to each size in turn, never shrunk; ``--fresh`` empties it first), measures
in the same run, with live members in 20 classic and 20 KIP-848 groups:

- the full poll (``tasks.polling.poll_cluster``: adapter snapshot and
  database write), median of ``--polls``, wall and this process's CPU
  (librdkafka's threads included; the JVM reading share groups is a process
  of its own, its CPU not counted), by stage;
- Kafka's CLI ``kafka-consumer-groups --describe --all-groups``, median of
  ``--polls``, each run right after a poll (JVM start included, as an
  operator runs it);
- the watcher's idle tick (``tasks.watching.watch_cluster``, nothing
  changed): wall and CPU (this process's and its JVM's, which answers the
  partition counts), median and max of ``--ticks``;
- detection latency: ``--trials`` times, a partition is added to a topic a
  group reads, at a random moment of the watcher's 1 s beat (a thread here
  runs a tick every WATCH_INTERVAL_SECONDS, as beat enqueues them), and the
  time until its finding is stored is taken;
- this process's resident memory (VmRSS sampled every 50 ms during the
  polls; it is the worker's code) and the py4j JVM's.

The table it prints is what bench/RESULTS.md shows.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402
from django.conf import settings  # noqa: E402

from bench import big_cluster  # noqa: E402
from groups.models import Cluster, Finding  # noqa: E402
from tasks.polling import cluster_adapter, poll_cluster  # noqa: E402
from tasks.watching import watch_cluster  # noqa: E402

CLUSTER = "scale-bench"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The highest VmRSS of this process while the block runs, sampled every 50 ms."""

    def __init__(self) -> None:
        self.peak, self._stop = 0.0, threading.Event()

    def __enter__(self) -> PeakRss:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(os.getpid()))
            self._stop.wait(0.05)

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


def jvm_pids() -> list[int]:
    """This process's py4j JVMs (children running the gateway)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == os.getpid() and b"py4j" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def measure_polls(cluster: Cluster, bootstrap: str, polls: int) -> dict:
    poll_cluster(cluster_id=cluster.id)  # warm-up: the first poll writes every row and starts the JVM
    poll_cluster(cluster_id=cluster.id)
    rows, cli = [], []
    with cluster_adapter(cluster) as adapter, PeakRss() as rss:
        for _ in range(polls):
            wall, cpu = time.monotonic(), time.process_time()
            summary = poll_cluster(cluster_id=cluster.id)
            assert summary.ok, summary.error
            rows.append({"total": time.monotonic() - wall, "cpu": time.process_time() - cpu,
                         "kafka": summary.kafka_seconds, "write": summary.write_seconds,
                         "stages": dict(adapter.last_timings), "stage_cpu": dict(adapter.last_cpu),
                         "partitions": summary.partitions, "groups": summary.groups})
            cli.append(big_cluster.cli_describe_all(bootstrap))
    median = statistics.median
    return {
        "partitions": rows[-1]["partitions"], "groups": rows[-1]["groups"],
        "poll": median(r["total"] for r in rows), "poll_all": [r["total"] for r in rows],
        "cpu": median(r["cpu"] for r in rows), "kafka": median(r["kafka"] for r in rows),
        "write": median(r["write"] for r in rows),
        "stages": {s: median(r["stages"][s] for r in rows) for s in rows[-1]["stages"]},
        "stage_cpu": {s: median(r["stage_cpu"][s] for r in rows) for s in rows[-1]["stage_cpu"]},
        "cli": median(cli), "cli_all": cli, "rss": rss.peak,
        "jvm_rss": sum(rss_mib(pid) for pid in jvm_pids()),
    }


def jvm_cpu() -> float:
    """CPU seconds so far of this process's py4j JVMs (the Java client the watcher asks for partition counts)."""
    return sum(big_cluster.cpu_seconds(pid) for pid in jvm_pids())


def measure_ticks(cluster: Cluster, ticks: int) -> dict:
    """Each tick's wall time and CPU: this process's and its JVM's together."""
    walls, cpus, split = [], [], []
    for _ in range(ticks):
        wall, cpu, java = time.monotonic(), time.process_time(), jvm_cpu()
        result = watch_cluster(cluster_id=cluster.id)
        walls.append(time.monotonic() - wall)
        split.append((time.process_time() - cpu, jvm_cpu() - java))
        cpus.append(sum(split[-1]))
        assert result.get("ok", True) and not result.get("observed"), result
        time.sleep(max(0.0, settings.WATCH_INTERVAL_SECONDS - walls[-1]))
    print("idle ticks, CPU ms (this process + JVM): "
          + ", ".join(f"{own * 1000:.0f}+{jvm * 1000:.0f}" for own, jvm in split), flush=True)
    return {"tick": statistics.median(walls), "tick_max": max(walls),
            "tick_cpu": statistics.median(cpus), "tick_cpu_max": max(cpus)}


def detection_topics(bootstrap: str, trials: int, tag: str) -> list[str]:
    """One topic of 2 partitions (3 records each) and a group committed on it
    per trial, made before the polls so they know both: the trials add
    partitions to these, never to the big cluster's own topics."""
    admin, names = AdminClient({"bootstrap.servers": bootstrap}), [f"scale.d{tag}.{n}" for n in range(trials)]
    for future in admin.create_topics([NewTopic(name, 2, 1) for name in names]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for name in names:
        for partition in range(2):
            for _ in range(3):
                producer.produce(name, b"d", partition=partition)
    producer.flush(60)
    for name in names:
        group = [ConsumerGroupTopicPartitions(name, [TopicPartition(name, p, 3) for p in range(2)])]
        for future in admin.alter_consumer_group_offsets(group).values():
            future.result()
    return names


def drop_detection_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in [*admin.delete_consumer_groups(names).values(), *admin.delete_topics(names).values()]:
        future.result()


def measure_detection(cluster: Cluster, bootstrap: str, names: list[str]) -> list[float]:
    """Seconds from create_partitions returning to the new partition's finding being stored."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            begun = time.monotonic()
            try:
                watch_cluster(cluster_id=cluster.id, started=begun)
            except Exception as error:  # noqa: BLE001 - reported, the beat goes on like Celery's
                print(f"tick failed: {error}", flush=True)
            stop.wait(max(0.0, settings.WATCH_INTERVAL_SECONDS - (time.monotonic() - begun)))

    admin = AdminClient({"bootstrap.servers": bootstrap})
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    latencies = []
    try:
        for trial, name in enumerate(names):
            count = 2
            time.sleep(random.uniform(0, settings.WATCH_INTERVAL_SECONDS))
            for future in admin.create_partitions([NewPartitions(name, count + 1)]).values():
                future.result()
            added = time.monotonic()
            while not Finding.objects.filter(cluster=cluster, topic__name=name, partition=count).exists():
                if time.monotonic() - added > 60:
                    raise RuntimeError(f"no finding for {name} [{count}] after 60 s")
                time.sleep(0.02)
            latencies.append(time.monotonic() - added)
            print(f"  detection trial {trial + 1}: {latencies[-1]:.3f}s ({name} [{count}])", flush=True)
    finally:
        stop.set()
        thread.join()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1020:51,10020:501,30000:1500,60000:3000",
                        help="partitions:groups, growing, comma-separated; multiples of 60 partitions (topics of "
                             "16, 20 and 24 in turn), so each size's topics are the next one's first ones")
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--ticks", type=int, default=10)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--fresh", action="store_true", help="empty the big cluster first")
    args = parser.parse_args()
    cluster_nodes = big_cluster.start()
    bootstrap = cluster_nodes.bootstrap
    print(f"big cluster: {bootstrap}; load average {os.getloadavg()}", flush=True)
    rows = []
    try:
        measure_sizes(args, bootstrap, rows)
    finally:
        # A cluster row left behind would be polled by every later bench's worker (and time out).
        Cluster.objects.filter(name=CLUSTER).delete()
    print_table(rows)


def measure_sizes(args: argparse.Namespace, bootstrap: str, rows: list[dict]) -> None:
    for number, size in enumerate(args.sizes.split(",")):
        partitions, groups = (int(n) for n in size.split(":"))
        big_cluster.populate(bootstrap, partitions=partitions, groups=groups, keep=not (args.fresh and number == 0))
        topics = len(big_cluster.topic_layout(partitions))
        Cluster.objects.filter(name=CLUSTER).delete()
        cluster = Cluster.objects.create(name=CLUSTER, bootstrap_servers=bootstrap)
        detecting = detection_topics(bootstrap, args.trials, str(partitions))
        try:
            with big_cluster.live_members(bootstrap, topics=topics):
                row = measure_polls(cluster, bootstrap, args.polls)
                row.update(measure_ticks(cluster, args.ticks))
                row["detection"] = measure_detection(cluster, bootstrap, detecting)
        finally:
            drop_detection_topics(bootstrap, detecting)
        row["load"] = os.getloadavg()[0]
        rows.append(row)
        print(f"{row['partitions']:,} partitions, {row['groups']} groups: full poll {row['poll']:.3f}s "
              f"(kafka {row['kafka']:.3f}s, database {row['write']:.3f}s, CPU {row['cpu']:.3f}s; all "
              + ", ".join(f"{t:.2f}" for t in row["poll_all"]) + "); stages "
              + ", ".join(f"{s} {t:.3f}s/{row['stage_cpu'][s]:.3f}s CPU" for s, t in row["stages"].items())
              + f"; CLI {row['cli']:.3f}s (all " + ", ".join(f"{t:.2f}" for t in row["cli_all"])
              + f"); ratio {row['poll'] / row['cli']:.2f}x; idle tick {row['tick']:.3f}s wall, "
              f"{row['tick_cpu'] * 1000:.0f} ms CPU (max {row['tick_cpu_max'] * 1000:.0f} ms); detection median "
              f"{statistics.median(row['detection']):.2f}s max {max(row['detection']):.2f}s; RSS peak "
              f"{row['rss']:.0f} MiB (JVM {row['jvm_rss']:.0f} MiB); load {row['load']:.1f}", flush=True)


def print_table(rows: list[dict]) -> None:
    print("\n| partitions / groups | full poll (Kafka + database) | CPU | CLI describe-all | poll / CLI "
          "| idle tick: wall, CPU (max) | detection: median, max | worker RSS peak (+ JVM) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['partitions']:,} / {row['groups']:,} | {row['poll']:.2f} s ({row['kafka']:.2f} + "
              f"{row['write']:.2f}) | {row['cpu']:.2f} s | {row['cli']:.2f} s | {row['poll'] / row['cli']:.2f}x | "
              f"{row['tick'] * 1000:.0f} ms, {row['tick_cpu'] * 1000:.0f} ms ({row['tick_cpu_max'] * 1000:.0f} ms) | "
              f"{statistics.median(row['detection']):.2f} s, {max(row['detection']):.2f} s | "
              f"{row['rss']:.0f} MiB (+{row['jvm_rss']:.0f}) | {row['load']:.1f} |")


if __name__ == "__main__":
    main()
