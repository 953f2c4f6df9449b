"""Backfill benchmark: 1,000,000 records of 200 bytes in one partition, and
the same spread over 8 partitions. Not a test.

    source scripts/env.sh && .venv/bin/python bench/backfill_bench.py [--records N] [--runs R] [--keep]

Side by side on the same range, in the same run:

- ``kcat -C -b B -t T [-p P] -o 0 -c N -e -q > /dev/null``: the single-reader reference;
- a plain confluent-kafka Python reader (assign, consume in batches);
- the Spark job's read alone (its exact reader options and session settings,
  a ``noop`` sink), in a fresh process: the first read (cold JVM) and the
  next ones (warm JVM, as on the long-lived Spark host);
- the real backfill job end to end (``tasks.backfill.run_backfill``, Parquet
  sink, verification and publish included), both ways a job runs: on the
  Spark host (``tasks.spark.host``, started by this bench and warmed by a
  first job) and in a Spark process of its own.

Start-up is reported separately: from the executor's spawn (or its request
to the host) to a ready Spark session, and the whole fixed cost of a job (a
1-record backfill end to end), both ways.
Topics ``bench.backfill.p1`` and ``bench.backfill.p8`` are created once and
deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from django.conf import settings  # noqa: E402

from groups.domain.planning import BackfillRange  # noqa: E402
from tasks.backfill.runner import BackfillRequest, run_backfill  # noqa: E402
from tasks.kafka.adapter import ClusterConfig, KafkaAdapter  # noqa: E402
from tasks.spark.host import HOST_CONF  # noqa: E402

VALUE_BYTES = 200


def prepare(admin: AdminClient, bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Idempotent: the topic with ``records`` values of 200 bytes, spread evenly."""
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
    payload = (os.urandom(VALUE_BYTES // 2).hex().encode())[:VALUE_BYTES]
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


def time_python_reader(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "gapwatch-bench-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    while seen < records:
        # Batches of 1,000: librdkafka waits to fill much bigger ones (10,000 took 8x longer here).
        for message in consumer.consume(num_messages=1_000, timeout=5.0):
            if message.error() and message.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(message.error())
            seen += 0 if message.error() else 1
    consumer.close()
    return time.monotonic() - started


# Reads after the first in one session; the steady state is the median of
# the last STEADY_READS of them (JIT compilation goes on for several reads).
WARM_READS = 9
STEADY_READS = 5
# Unmeasured jobs on the host before each layout's measured ones.
HOST_WARMUP_JOBS = 2
HOST_MEMORY = "1g"


def spark_read_child(spec_path: str) -> None:
    """In a fresh process: the job's own reader into a noop sink, once cold
    and WARM_READS times warm, in a session set up as the Spark host's."""
    from tasks.spark import backfill_job
    from tasks.spark.reader import kafka_options, read_ranges
    from tasks.spark.session import build_session
    from tasks.spark.spec import parse_spec

    spec = parse_spec(json.loads(Path(spec_path).read_text()))
    backfill_job.prepare_process_environment()

    started = time.monotonic()
    spark = build_session(master=spec.master, app_name="backfill-bench-read", jars_dir=Path(spec.jars_dir),
                          driver_memory=HOST_MEMORY, extra=HOST_CONF)
    session_seconds = time.monotonic() - started
    options = kafka_options(spec.kafka, "")
    reads = []
    for _ in range(1 + WARM_READS):
        begin = time.monotonic()
        read_ranges(spark, spec, options).write.format("noop").mode("overwrite").save()
        reads.append(time.monotonic() - begin)
    spark.stop()
    print(json.dumps({"session": session_seconds, "reads": reads}))


def time_spark_read(bootstrap: str, topic: str, partitions: int, records: int, master: str) -> dict:
    per_partition = records // partitions
    with tempfile.TemporaryDirectory() as workdir:
        spec = {"job_id": "bench", "attempt": "read", "kafka": {"bootstrap_servers": bootstrap},
                "ranges": [{"topic": topic, "partition": p, "start": 0, "end": per_partition}
                           for p in range(partitions)],
                "sink": {"kind": "parquet", "output": workdir},
                "spark": {"master": master, "jars_dir": str(settings.SPARK_KAFKA_JARS_DIR)},
                "progress_file": f"{workdir}/progress.json", "result_file": f"{workdir}/result.json"}
        Path(workdir, "spec.json").write_text(json.dumps(spec))
        spawned = time.monotonic()
        answer = subprocess.run([sys.executable, __file__, "--spark-read-child", f"{workdir}/spec.json"],
                                capture_output=True, text=True, check=True, timeout=900, cwd=ROOT)
        measured = json.loads(answer.stdout.strip().splitlines()[-1])
        measured["process"] = time.monotonic() - spawned
        return measured


def run_job(bootstrap: str, topic: str, partitions: int, records: int, master: str, output: str,
            host: str = "") -> dict:
    """One backfill job end to end; on the Spark host if ``host`` (its socket)."""
    per_partition = records // partitions
    result = run_backfill(BackfillRequest(
        run_id=f"bench-{topic}-{records}", cluster=ClusterConfig(bootstrap), sink="parquet", output=output,
        ranges=tuple(BackfillRange(topic, p, 0, per_partition) for p in range(partitions)),
        master=master, timeout_seconds=1800, spark_host=host))
    assert result["delivered"] == per_partition * partitions, result
    assert result["attempts"][-1]["mode"] == ("host" if host else "process"), result["attempts"]
    return {**result["timings"], "total": result["seconds"]}


def start_host(workdir: str, master: str) -> tuple[subprocess.Popen, str]:
    socket_path = f"{workdir}/host.sock"
    log = open(f"{workdir}/host.log", "ab")
    host = subprocess.Popen([sys.executable, "-m", "tasks.spark.host", "--socket", socket_path, "--master", master,
                             "--jars-dir", str(settings.SPARK_KAFKA_JARS_DIR), "--driver-memory", HOST_MEMORY],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while "Spark host ready" not in Path(f"{workdir}/host.log").read_text():
        if host.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the Spark host did not start: {Path(workdir, 'host.log').read_text()[-2000:]}")
        time.sleep(0.2)
    return host, socket_path


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--keep", action="store_true", help="keep the bench topics for the next run")
    parser.add_argument("--spark-read-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_read_child:
        spark_read_child(args.spark_read_child)
        return
    if not shutil.which("kcat"):
        sys.exit("kcat is missing: apt-get install kcat")
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    layouts = [("bench.backfill.p1", 1), ("bench.backfill.p8", 8)]
    started = time.monotonic()
    for topic, partitions in layouts:
        prepare(admin, args.bootstrap, topic, partitions, args.records)
    print(f"prepared in {time.monotonic() - started:.1f}s; load average {os.getloadavg()[0]:.2f}; "
          f"{os.cpu_count()} cores; master {args.master}")
    output = tempfile.mkdtemp(prefix="gapwatch-backfill-bench-")
    host, socket_path = start_host(output, args.master)
    report: dict = {"records": args.records, "master": args.master, "layouts": {}}
    try:
        # The host's first job runs in a cold JVM: reported apart, as "first job on a fresh host".
        report["host_first_job"] = run_job(args.bootstrap, "bench.backfill.p1", 1, args.records, args.master, output,
                                           socket_path)
        tiny = [run_job(args.bootstrap, "bench.backfill.p1", 1, 1, args.master, output) for _ in range(args.runs)]
        tiny_host = [run_job(args.bootstrap, "bench.backfill.p1", 1, 1, args.master, output, socket_path)
                     for _ in range(args.runs)]
        report["fixed_cost"] = {key: median([t[key] for t in tiny]) for key in tiny[0]}
        report["fixed_cost_host"] = {key: median([t[key] for t in tiny_host]) for key in tiny_host[0]}
        for topic, partitions in layouts:
            kcat = [time_kcat(args.bootstrap, topic, partitions, args.records) for _ in range(args.runs)]
            python = [time_python_reader(args.bootstrap, topic, partitions, args.records) for _ in range(args.runs)]
            reads = [time_spark_read(args.bootstrap, topic, partitions, args.records, args.master)
                     for _ in range(args.runs)]
            for _ in range(HOST_WARMUP_JOBS):
                run_job(args.bootstrap, topic, partitions, args.records, args.master, output, socket_path)
            hosted = [run_job(args.bootstrap, topic, partitions, args.records, args.master, output, socket_path)
                      for _ in range(args.runs)]
            jobs = [run_job(args.bootstrap, topic, partitions, args.records, args.master, output)
                    for _ in range(args.runs)]
            row = {
                "kcat": median(kcat), "python": median(python),
                "spark_read_cold": median([r["reads"][0] for r in reads]),
                "spark_read_second": median([r["reads"][1] for r in reads]),
                "spark_read_warm": median([seconds for r in reads for seconds in r["reads"][-STEADY_READS:]]),
                "spark_session": median([r["session"] for r in reads]),
                "host_write": median([j["write"] for j in hosted]),
                "host_verify": median([j["verify"] for j in hosted]),
                "host_startup": median([j["startup"] for j in hosted]),
                "host_total": median([j["total"] for j in hosted]),
                "job_write": median([j["write"] for j in jobs]), "job_verify": median([j["verify"] for j in jobs]),
                "job_startup": median([j["startup"] for j in jobs]), "job_total": median([j["total"] for j in jobs]),
                "raw": {"kcat": kcat, "python": python, "spark_reads": reads, "host_jobs": hosted, "jobs": jobs},
            }
            report["layouts"][topic] = row
            n = args.records
            print(f"\n{topic} ({partitions} partition{'s' if partitions > 1 else ''}), {n:,} records, "
                  f"median of {args.runs} (steady reads: of {args.runs * STEADY_READS})")
            print(f"  {'reader':48} {'seconds':>8} {'records/s':>11} {'vs kcat':>8}")
            for name, seconds in [
                ("kcat -> /dev/null", row["kcat"]),
                ("confluent-kafka Python reader", row["python"]),
                ("Spark read, noop sink, warm JVM (Spark host)", row["spark_read_warm"]),
                ("Spark read, noop sink, 2nd read of a JVM", row["spark_read_second"]),
                ("Spark read, noop sink, cold JVM (1st read)", row["spark_read_cold"]),
                ("job on the Spark host: read + write Parquet", row["host_write"]),
                ("job on the Spark host: verify (read back)", row["host_verify"]),
                ("job on the Spark host: whole job", row["host_total"]),
                ("job in its own process: read + write Parquet", row["job_write"]),
                ("job in its own process: whole job", row["job_total"]),
            ]:
                print(f"  {name:48} {seconds:8.2f} {n / seconds:11,.0f} {row['kcat'] / seconds:8.2f}")
            print(f"  start-up to a ready session: on the host {row['host_startup']:.3f}s, "
                  f"own process {row['job_startup']:.2f}s")
        first = report["host_first_job"]
        print(f"\nfirst job on a fresh host (cold JVM, {args.records:,} records, p1): {first['total']:.2f}s "
              f"(read + write {first['write']:.2f}s, verify {first['verify']:.2f}s)")
        for label, key in (("own process", "fixed_cost"), ("Spark host", "fixed_cost_host")):
            fixed = report[key]
            print(f"fixed cost of a job, {label} (1-record backfill, median of {args.runs}): {fixed['total']:.2f}s "
                  f"= start-up {fixed['startup']:.2f}s + first read/write {fixed['write']:.2f}s + "
                  f"verify {fixed['verify']:.2f}s + explain/publish {fixed['finish']:.2f}s (+ Kafka checks)")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(json.dumps(report))
    finally:
        os.killpg(host.pid, 9)
        host.wait()
        shutil.rmtree(output, ignore_errors=True)
        if not args.keep:
            for topic, _ in layouts:
                try:
                    admin.delete_topics([topic])[topic].result(timeout=60)
                except Exception:  # noqa: BLE001 - best-effort cleanup
                    pass


if __name__ == "__main__":
    main()
