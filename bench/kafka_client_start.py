"""What a new process pays for its first reads through Kafka's Java client
(adapters.kafka.jvm: each Celery worker process starts its own JVM), with and
without the class-data-sharing archive that scripts/setup.sh writes
(adapters/kafka/class_archive.py):

    .venv/bin/python bench/kafka_client_start.py [runs]

Each run is a fresh process: the JVM's start and a poll's four Java reads
(topic ids, partition counts, group reads, topic readers) against the local
broker; the wall seconds of that and the JVM's CPU seconds. Runs of the two
configurations alternate. Results in bench/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_RUN = """
import json, os, sys, time
from adapters.kafka import jvm
from adapters.kafka.java_reads import JavaReads
from groups.domain.cluster_config import ClusterConfig
options = jvm.class_archive_options() if sys.argv[1] == "archive" else ()
started = time.monotonic()
gateway = jvm.start_gateway(extra_options=options)
with JavaReads(ClusterConfig(os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")), gateway=gateway) as reads:
    counts = reads.partition_counts()
    reads.topic_ids()
    reads.read_groups(["bench"])
    reads.topic_readers(["bench"], dict(list(counts.items())[:20]))
wall = time.monotonic() - started
stat = open(f"/proc/{gateway.java_process.pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
jvm.stop_gateway(gateway)
print(json.dumps({"wall": wall, "cpu": cpu}))
"""
CONFIGURATIONS = ("plain", "archive")


def one_run(configuration: str) -> dict:
    done = subprocess.run([sys.executable, "-c", ONE_RUN, configuration], cwd=ROOT, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(runs: int) -> None:
    from adapters.kafka import jvm

    if not jvm.class_archive_options():
        sys.exit(f"no class archive at {jvm.class_archive()}: run scripts/setup.sh")
    results: dict[str, list[dict]] = {name: [] for name in CONFIGURATIONS}
    for _ in range(runs):
        for name in CONFIGURATIONS:
            results[name].append(one_run(name))
    print(f"| JVM | wall s, median (min-max) | JVM CPU s, median (min-max) | runs |\n|---|---|---|---|")
    for name, rows in results.items():
        walls, cpus = [r["wall"] for r in rows], [r["cpu"] for r in rows]
        print(f"| {name} | {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) "
              f"| {statistics.median(cpus):.2f} ({min(cpus):.2f}-{max(cpus):.2f}) | {runs} |")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
