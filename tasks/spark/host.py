"""The Spark host: a long-lived process with one warm Spark session that runs
backfill jobs for the executor, so that a job skips the JVM start (about 6 s
here) and the JIT warm-up of a fresh JVM (its first read of a million records
took 4-5x as long as later ones; see bench/RESULTS.md).

    python -m tasks.spark.host --socket PATH [--master local[*]] [--jars-dir DIR]
                               [--driver-memory 1g] [--slots 1]

It is a process of its own, never the Celery worker: a JVM crash or an
out-of-memory kill ends the host and the job it runs, and the executor runs
that job again in a process of its own (``tasks.backfill.runner``). It listens on a
Unix socket (mode 0600: the request carries the SASL password), one
connection per job attempt, newline-delimited JSON:

    executor -> host   {"spec": "<path of the job spec>", "password": "<SASL password or empty>"}
    host -> executor   {"accepted": true, "pid": <host pid>}  or  {"exit": 2, "error": "..."}
    executor -> host   publish | discard                     (a Parquet job, once staged)
    host -> executor   {"exit": <code>}                       (the exit codes of backfill_job)

The job is ``tasks.spark.backfill_job.run`` on a new session of the host's
Spark context (SQL settings of its own), with the spec, progress and result
files of a job process. ``--slots`` jobs run at once (1 by default); a waiting
job reports the phase ``queued``. If the executor's connection closes before
the job ends (the executor timed out or died), the host cancels the job's
Spark job groups and discards its staged output: nothing is published.

The spec's ``spark.master`` and ``driver_memory`` are the host's own (set when
it starts); a handler sink's module is imported by Python workers that Spark
reuses, so restart the host after changing a handler's code.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from tasks.spark import backfill_job
from tasks.spark.spec import SpecError, parse_spec

log = logging.getLogger("gapwatch.spark_host")

MAX_REQUEST_BYTES = 64 * 1024
# Settings of the host's session on top of tasks.spark.session's. A
# long-lived JVM keeps Spark's cached Kafka consumers (and their fetched
# buffers) until evicted; every query has a group id of its own, so cached
# consumers are never reused across jobs: evict them soon (without this,
# 1M-record reads in one session slowed from 1.4 s to 2.5-6 s after eight
# of them here, and a 768m driver ran out of heap).
HOST_CONF = {
    # The throughput collector: warm 1M-record reads took 0.84-0.94 s with it
    # against 0.96-1.12 s with G1 here (bench/RESULTS.md).
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.kafka.consumer.cache.capacity": "16",
    "spark.kafka.consumer.cache.timeout": "30s",
    "spark.kafka.consumer.cache.evictorThreadRunInterval": "10s",
    "spark.kafka.consumer.fetchedData.cache.timeout": "30s",
    "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "10s",
}


class HostError(Exception):
    pass


class ConnectionPipe(threading.Thread):
    """The executor's side of one attempt: its publish/discard decision, or
    its going away (the connection closes before a decision: ``discard``,
    and ``on_gone`` runs)."""

    def __init__(self, reader, on_gone) -> None:
        super().__init__(name="spark-host-pipe", daemon=True)
        self.reader = reader
        self.on_gone = on_gone
        self.decision: str | None = None
        self.decided = threading.Event()
        self.gone = threading.Event()

    def run(self) -> None:
        try:
            for raw in self.reader:
                line = raw.decode(errors="replace").strip()
                if line in ("publish", "discard") and not self.decided.is_set():
                    self.decision = line
                    self.decided.set()
        except OSError:
            pass
        self.gone.set()
        if not self.decided.is_set():
            self.decision = "discard"
            self.decided.set()
        self.on_gone()


class SparkHost:
    def __init__(self, spark, *, slots: int = 1) -> None:
        self.spark = spark
        self.slots = threading.Semaphore(slots)
        self.jobs_run = 0

    def serve(self, connection: socket.socket) -> None:
        """One attempt, from its request to its exit code."""
        reader = connection.makefile("rb")

        def send(payload: dict) -> None:
            try:
                connection.sendall((json.dumps(payload) + "\n").encode())
            except OSError:
                pass  # the executor went away; on_gone has cancelled the job

        try:
            try:
                request = json.loads(reader.readline(MAX_REQUEST_BYTES) or b"null")
                if not isinstance(request, dict) or not isinstance(request.get("spec"), str):
                    raise SpecError('the request must be {"spec": PATH, "password": TEXT}')
                password = request.get("password") or ""
                spec = parse_spec(json.loads(Path(request["spec"]).read_text()))
            except (OSError, ValueError) as error:
                send({"exit": 2, "error": f"bad request: {error}"})
                return
            send({"accepted": True, "pid": os.getpid()})
            finished = threading.Event()
            groups = backfill_job.job_groups(spec)

            def on_gone() -> None:
                if not finished.is_set():
                    log.warning("backfill %s attempt %s: the executor went away; cancelling", spec.job_id,
                                spec.attempt)
                    for group in groups:
                        self.spark.sparkContext.cancelJobGroup(group)

            pipe = ConnectionPipe(reader, on_gone)
            pipe.start()
            backfill_job.ProgressFile(spec.progress_file, spec.total).write("queued", 0)
            while not self.slots.acquire(timeout=0.5):
                if pipe.gone.is_set():
                    return
            try:
                if pipe.gone.is_set():
                    return
                log.info("backfill %s attempt %s: running", spec.job_id, spec.attempt)
                code = backfill_job.run(spec, parent_pipe=pipe, started=time.time(), spark=self.spark.newSession(),
                                        password=password)
            finally:
                finished.set()
                self.slots.release()
                self.jobs_run += 1
            log.info("backfill %s attempt %s: exit %s", spec.job_id, spec.attempt, code)
            send({"exit": code})
        finally:
            try:
                connection.close()
            except OSError:
                pass


def listen(path: Path) -> socket.socket:
    """A Unix socket at ``path`` (mode 0600). A socket file nobody answers on
    is stale and replaced; one with a live host is refused."""
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
        else:
            raise HostError(f"another Spark host listens on {path}")
        finally:
            probe.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        server.bind(str(path))
    finally:
        os.umask(old_mask)
    os.chmod(path, 0o600)
    server.listen(16)
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.spark.host", description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, help="path of the Unix socket to listen on")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    parser.add_argument("--jars-dir", default=os.environ.get("SPARK_KAFKA_JARS_DIR", ""),
                        help="folder of the Spark Kafka connector jars (from scripts/setup.sh)")
    parser.add_argument("--driver-memory", default=os.environ.get("BACKFILL_HOST_MEMORY", "1g"))
    parser.add_argument("--slots", type=int, default=1, help="jobs run at once")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if not args.jars_dir:
        parser.error("--jars-dir (or SPARK_KAFKA_JARS_DIR) is required")
    if not re.fullmatch(r"[0-9]+[kmgtKMGT]?", args.driver_memory):
        parser.error(f"--driver-memory (or BACKFILL_HOST_MEMORY) must look like 1g or 768m, got {args.driver_memory!r}")
    if args.slots < 1:
        parser.error("--slots must be at least 1")
    path = Path(args.socket).absolute()
    try:
        server = listen(path)
    except (HostError, OSError) as error:
        log.error("cannot listen on %s: %s", path, error)
        return 1
    from tasks.spark.session import build_session

    backfill_job.prepare_process_environment()
    started = time.monotonic()
    spark = build_session(master=args.master, app_name="gapwatch-spark-host", jars_dir=Path(args.jars_dir),
                          driver_memory=args.driver_memory, extra=HOST_CONF)
    spark.sparkContext.setLogLevel("WARN")
    host = SparkHost(spark, slots=args.slots)

    def stop(signum, frame) -> None:
        log.info("stopping (signal %s) after %d jobs", signum, host.jobs_run)
        try:
            path.unlink()
        except OSError:
            pass
        # Running jobs die with the JVM; their executors see the connection close and run them again.
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("Spark host ready on %s in %.1fs (master %s, driver memory %s, %d slot(s))", path,
             time.monotonic() - started, args.master, args.driver_memory, args.slots)
    while True:
        connection, _ = server.accept()
        threading.Thread(target=host.serve, args=(connection,), name="spark-host-job", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
