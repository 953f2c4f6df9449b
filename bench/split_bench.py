"""The full poll of a big cluster read whole and split into parts that other
Celery workers read (issue 24, item 4), in the same run, pair by pair.

Run with `bash bench/run.sh split [--partitions N] [--groups N] [--polls N]
[--workers N] [--parts N]` (its own database, Redis database 3). It brings
the big cluster of ``bench/big_cluster.py`` to ``--partitions`` (kept between
runs), starts ``--workers`` Celery workers (threads, one task each) that take
the parts, and times ``--polls`` pairs of full polls of one cluster row
(``tasks.polling.poll_cluster``): one whole, one in ``--parts`` parts. For
each: wall time, this process's CPU (the poll's worker), and how many parts
the other workers read. What splitting buys depends on spare cores: the
workers, the brokers and this process share this machine's.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
# A Redis database of the bench's own: no other worker takes its parts.
os.environ["REDIS_URL"] = re.sub(r"(/\d+)?$", "/3", os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), count=1)
django.setup()

from django.conf import settings  # noqa: E402

from bench import big_cluster  # noqa: E402
from controlplane.celery import app  # noqa: E402
from groups.models import Cluster  # noqa: E402
from tasks.polling import poll_cluster  # noqa: E402
from tests.harness.workers import start_celery, stop_celery, worker_env  # noqa: E402
from tests.harness.kafka_clients import wait_until  # noqa: E402

CLUSTER = "split-bench"


def start_workers(count: int, log) -> list[subprocess.Popen]:
    """``count`` Celery workers (threads, one task each) on the bench's database and Redis."""
    processes = [start_celery(["worker", "--pool", "threads", "--concurrency", "1", "-n", f"split-bench-{n}@%h",
                               "-Q", "celery"], worker_env(), log) for n in range(count)]
    wait_until(lambda: len({host for reply in app.control.ping(timeout=1) for host in reply
                            if host.startswith("split-bench-")}) == count,
               timeout=120, what="the part workers to answer")
    return processes


def timed_poll(cluster: Cluster, split: int) -> dict:
    settings.POLL_SPLIT_PARTITIONS, settings.POLL_PARTS = (1, split) if split > 1 else (0, 2)
    wall, cpu = time.monotonic(), time.process_time()
    summary = poll_cluster(cluster_id=cluster.id)
    assert summary.ok, summary.error
    return {"wall": time.monotonic() - wall, "cpu": time.process_time() - cpu, "kafka": summary.kafka_seconds,
            "write": summary.write_seconds, "elsewhere": summary.parts.get("read_elsewhere", 0),
            "partitions": summary.partitions, "groups": summary.groups}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=60_000)
    parser.add_argument("--groups", type=int, default=3_000)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--parts", type=int, default=3)
    args = parser.parse_args()
    cluster_home = big_cluster.start()
    bootstrap = cluster_home.bootstrap
    big_cluster.populate(bootstrap, args.partitions, args.groups, keep=True)
    Cluster.objects.filter(name=CLUSTER).delete()
    cluster = Cluster.objects.create(name=CLUSTER, bootstrap_servers=bootstrap)
    log = open(ROOT / ".gapwatch" / "split-bench-workers.log", "ab")  # noqa: SIM115 - the workers' log
    workers = start_workers(args.workers, log)
    try:
        timed_poll(cluster, 1)  # the first poll writes every row and starts the JVM
        timed_poll(cluster, args.parts)
        whole, split = [], []
        for _ in range(args.polls):
            whole.append(timed_poll(cluster, 1))
            split.append(timed_poll(cluster, args.parts))
    finally:
        for process in workers:
            stop_celery(process)
        Cluster.objects.filter(id=cluster.id).delete()
    median = statistics.median
    print(f"\n{whole[-1]['partitions']:,} partitions, {whole[-1]['groups']:,} groups; {args.polls} pairs; "
          f"{args.workers} part workers, {args.parts} parts; load {os.getloadavg()[0]:.1f}")
    print("| poll | wall (median, all) | Kafka | write | CPU of the poll's worker | parts read by other workers |")
    print("|---|---|---|---|---|---|")
    for name, rows, parts in (("whole", whole, 0), (f"{args.parts} parts", split, 2 * args.parts)):
        walls = ", ".join(f"{row['wall']:.2f}" for row in rows)
        print(f"| {name} | {median(r['wall'] for r in rows):.2f} s ({walls}) | "
              f"{median(r['kafka'] for r in rows):.2f} s | {median(r['write'] for r in rows):.2f} s | "
              f"{median(r['cpu'] for r in rows):.2f} s | {median(r['elsewhere'] for r in rows)} of {parts} |")


if __name__ == "__main__":
    main()
