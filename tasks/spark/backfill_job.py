"""The Spark backfill job: reads exactly ``[start, end)`` of each partition
with Spark's Kafka source and delivers it to one sink (``tasks.spark.sinks``).

Run in its own process, with explicit arguments only (no Django, no ORM)::

    python -m tasks.spark.backfill_job --spec SPEC.json [--parent-pipe]

or, with the same spec, on a session of a Spark Connect server
(``tasks.backfill.launch.ConnectJob`` calls ``run`` with the session).

The spec is ``tasks.spark.spec.JobSpec`` (its JSON form is described there),
the one contract with the runner that writes it.

The SASL password is read from the environment variable
``GAPWATCH_KAFKA_SASL_PASSWORD``, never from the spec or the command line,
and is replaced by ``***`` in any error text the job writes.

While it runs, the job rewrites ``progress_file`` (phase, records done of
total, estimated from completed Spark tasks: each task reads a known share of
the range). At the end it writes ``result_file``: status, the per-partition
summary of what the sink holds (``counting.partition_summary``), timings
(epoch seconds) and, on failure, the error text.

With ``--parent-pipe`` (how ``tasks.backfill.runner`` runs it) a Parquet job stops
after counting its staged output, writes the result with status ``staged``
and waits for one line on stdin: ``publish`` or ``discard``. The parent
decides after explaining any missing offsets. If stdin closes first (the
parent died), the job exits without publishing. Without ``--parent-pipe``,
staged output is published unless it holds duplicates or records outside
the range.

Exit codes: 0 done (see the result's status), 1 failed (the result holds the
error), 2 bad arguments or spec, 3 the parent went away.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from groups.domain.secrets import secret_redact
from groups.domain.sinks import KAFKA, PARQUET
from tasks.spark.connect import job_tag
from tasks.spark.session import is_connect, sql_api
from tasks.spark.reader import kafka_options, read_ranges
from tasks.spark.spec import PASSWORD_ENV, JobSpec, min_partitions, parse_spec

# Static Spark settings the shared session builder does not set: no console
# progress bar in the log, and the JAAS option (it holds the password)
# redacted wherever Spark prints options.
SUBMIT_ARGS = (
    "--conf spark.ui.showConsoleProgress=false "
    "--conf spark.redaction.regex=(?i)secret|password|token|access[.]?key|jaas "
    "pyspark-shell"
)
ERROR_TEXT_LIMIT = 100_000

log = logging.getLogger("gapwatch.backfill_job")


class ProgressFile:
    """Writes ``{"phase", "done", "total", ...}`` atomically (rename), so the
    parent never reads half a file."""

    def __init__(self, path: str, total: int) -> None:
        self.path = Path(path)
        self.total = total
        self._lock = threading.Lock()

    def write(self, phase: str, done: int, **extra) -> None:
        payload = {"phase": phase, "done": int(done), "total": self.total, "at": time.time(), **extra}
        with self._lock:
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps(payload))
            os.replace(temporary, self.path)


def session_parallelism(spark) -> int:
    """How many tasks the session runs at once. A Connect client cannot ask
    the SparkContext: it reads ``spark.default.parallelism`` (set by
    ``tasks.spark.connect`` for local masters), or else counts the
    partitions Spark gives a plain range (its default parallelism)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    F, _ = sql_api(spark)  # noqa: N806
    row = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p").alias("p")).first()
    return int(row.p) + 1


class TaskProgress(threading.Thread):
    """Estimates records done from the write's completed Spark tasks (Spark
    splits each range into tasks of near-equal offset counts), from the
    status tracker of a session of this process's own SparkContext."""

    def __init__(self, spark, progress: ProgressFile, group: str, interval: float = 0.5) -> None:
        super().__init__(name="backfill-progress", daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.progress = progress
        self.group = group
        self.interval = interval
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        last = None
        while not self.stopped.wait(self.interval):
            try:
                done_tasks = total_tasks = 0
                for job_id in self.tracker.getJobIdsForGroup(self.group):
                    job = self.tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job else []:
                        stage = self.tracker.getStageInfo(stage_id)
                        if stage:
                            done_tasks += stage.numCompletedTasks
                            total_tasks += stage.numTasks
            except Exception:  # noqa: BLE001 - progress is best effort; the JVM may be stopping
                continue
            if total_tasks and (done_tasks, total_tasks) != last:
                last = (done_tasks, total_tasks)
                done = self.progress.total * done_tasks // total_tasks
                self.progress.write("writing", done, tasks_done=done_tasks, tasks_total=total_tasks)


class ConnectProgress:
    """The same estimate for a Spark Connect session, from its progress
    handler (the stages of the running operation: tasks done of total)."""

    def __init__(self, spark, progress: ProgressFile) -> None:
        self.spark = spark
        self.progress = progress
        self.active = False
        self._last = None

    def start(self) -> None:
        self.active = True
        self.spark.registerProgressHandler(self._handle)

    def stop(self) -> None:
        self.active = False
        self.spark.removeProgressHandler(self._handle)

    def _handle(self, stages, inflight_tasks, operation_id, done) -> None:
        total_tasks = sum(stage.num_tasks for stage in stages)
        done_tasks = sum(stage.num_completed_tasks for stage in stages)
        if not self.active or not total_tasks or (done_tasks, total_tasks) == self._last:
            return
        self._last = (done_tasks, total_tasks)
        self.progress.write("writing", self.progress.total * done_tasks // total_tasks,
                            tasks_done=done_tasks, tasks_total=total_tasks)


class ParentPipe(threading.Thread):
    """Reads the parent's decision (``publish``/``discard``) from stdin; if
    stdin closes before one arrives, the parent is gone and so is the job."""

    def __init__(self) -> None:
        super().__init__(name="backfill-parent-pipe", daemon=True)
        self.decision: str | None = None
        self.decided = threading.Event()

    def run(self) -> None:
        # Raw reads of fd 0: a daemon thread blocked in sys.stdin's buffered
        # reader makes the interpreter abort at exit (it holds the buffer lock).
        pending = b""
        while chunk := os.read(0, 4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").strip()
                if line in ("publish", "discard") and not self.decided.is_set():
                    self.decision = line
                    self.decided.set()
        if not self.decided.is_set():
            sys.stderr.write("backfill job: the parent closed its pipe without a decision; exiting unpublished\n")
            sys.stderr.flush()
            # The JVM exits by itself when this process's pipe to it closes.
            os._exit(3)


def error_text(error: BaseException, password: str) -> str:
    """The exception as Spark gives it (for a JVM error: the Java exception,
    its message and stack with every ``Caused by``), the password masked."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return secret_redact(text, password)[:ERROR_TEXT_LIMIT]


def make_sink(spark, spec: JobSpec, options: dict[str, str]):
    from tasks.spark.sinks.handler import HandlerSink
    from tasks.spark.sinks.kafka import KafkaSink
    from tasks.spark.sinks.parquet import ParquetSink

    if spec.sink.kind == PARQUET:
        return ParquetSink(spark, output=spec.sink.output, job_id=spec.job_id, attempt=spec.attempt)
    if spec.sink.kind == KAFKA:
        return KafkaSink(spark, kafka_options=options, topics=dict(spec.sink.topics),
                         start_offsets={t: dict(o) for t, o in spec.sink.start_offsets.items()},
                         job_id=spec.job_id, attempt=spec.attempt)
    return HandlerSink(spark, handler=spec.sink.handler)


def _write_json(path: str, payload: dict) -> None:
    target = Path(path)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(payload, indent=1, default=str))
    os.replace(temporary, target)


def prepare_process_environment() -> None:
    """What a process that builds a Spark session for backfills needs first:
    Spark's submit arguments, and Python workers (handler sink) that import
    this project and the handler."""
    os.environ["PYSPARK_SUBMIT_ARGS"] = SUBMIT_ARGS
    project = str(Path(__file__).resolve().parents[2])
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if project not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (project, *paths) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def run(spec: JobSpec, *, parent_pipe, started: float, spark=None, password: str | None = None) -> int:
    """1. Start Spark with the local connector jars (or use ``spark``, a
    Spark Connect session: ``tasks.backfill.launch.ConnectJob``; every
    operation then carries the attempt's tag); 2. the sink removes this job's stale
    staging; 3. read the ranges and write them (progress from completed
    tasks); 4. count what the sink holds; 5. Parquet: wait for the parent's
    decision (or decide alone), then publish or discard.

    ``parent_pipe`` has ``decided`` (an Event) and ``decision``; None decides
    alone. ``password`` defaults to the environment (PASSWORD_ENV)."""
    from tasks.spark.session import build_session

    if password is None:
        password = os.environ.get(PASSWORD_ENV, "")
    own_session = spark is None
    tag = job_tag(spec.job_id, spec.attempt)
    progress = ProgressFile(spec.progress_file, spec.total)
    result: dict = {"job_id": spec.job_id, "attempt": spec.attempt, "status": "failed",
                    "sink": {"kind": spec.sink.kind},
                    "ranges": spec.ranges_json(),
                    "timings": {"started": started}}
    timings = result["timings"]
    progress.write("starting", 0)
    sink = None
    try:
        if own_session:
            prepare_process_environment()
            spark = build_session(master=spec.master, app_name=f"gapwatch-backfill-{spec.job_id}",
                                  jars_dir=Path(spec.jars_dir), driver_memory=spec.driver_memory)
            spark.sparkContext.setLogLevel("WARN")
        connect = is_connect(spark)
        if connect:
            # Every operation of this attempt, so the executor can interrupt them.
            spark.addTag(tag)
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        parallelism = session_parallelism(spark)
        result["min_partitions"] = min_partitions(spec, parallelism)
        timings["session_ready"] = time.time()
        options = kafka_options(spec.kafka, password)
        sink = make_sink(spark, spec, options)
        result["sink"] = sink.describe()
        sink.prepare()
        progress.write("writing", 0)
        if connect:
            tracker = ConnectProgress(spark, progress)
            tracker.start()
        else:
            tracker = TaskProgress(spark, progress, f"{tag}-write")
            tracker.start()
            spark.sparkContext.setJobGroup(f"{tag}-write", f"backfill {spec.job_id} attempt {spec.attempt}")
        timings["write_started"] = time.time()
        try:
            sink.write(read_ranges(spark, spec, options, parallelism=parallelism))
        finally:
            tracker.stop()
            if not connect:
                spark.sparkContext.setJobGroup(f"{tag}-verify", "count what the sink holds")
        timings["written"] = time.time()
        progress.write("verifying", spec.total)
        result["partitions"] = sink.summarize(spec.ranges)
        timings["verified"] = time.time()
        if sink.needs_publish:
            clean = all(p["duplicates"] == 0 and p["outside_range"] == 0 for p in result["partitions"])
            if parent_pipe is not None:
                result["status"] = "staged"
                _write_json(spec.result_file, result)
                progress.write("staged", spec.total)
                parent_pipe.decided.wait()
                decision = parent_pipe.decision
            else:
                decision = "publish" if clean else "discard"
            if decision == "publish":
                sink.publish({"job_id": spec.job_id, "attempt": spec.attempt, "ranges": spec.ranges_json(),
                              "partitions": [{k: v for k, v in p.items() if k != "holes"}
                                             for p in result["partitions"]],
                              "published_at": time.time()})
                result["status"] = "published"
            else:
                sink.discard()
                result["status"] = "discarded"
        else:
            result["status"] = "delivered"
        timings["finished"] = time.time()
        _write_json(spec.result_file, result)
        progress.write("done", spec.total)
        return 0
    except Exception as error:  # noqa: BLE001 - any failure is reported through the result file
        log.error("backfill %s attempt %s failed", spec.job_id, spec.attempt, exc_info=True)
        result["status"] = "failed"
        result["error"] = error_text(error, password)
        if sink is not None:
            try:
                sink.discard()
            except Exception:  # noqa: BLE001 - the next attempt removes stale staging anyway
                log.warning("could not remove the staged output", exc_info=True)
        _write_json(spec.result_file, result)
        progress.write("failed", 0)
        return 1
    finally:
        if own_session and spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass


def main(argv: list[str] | None = None) -> int:
    started = time.time()
    parser = argparse.ArgumentParser(prog="python -m tasks.spark.backfill_job", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", required=True, help="path of the job spec (JSON)")
    parser.add_argument("--parent-pipe", action="store_true",
                        help="wait for publish/discard on stdin; exit if stdin closes first")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        spec = parse_spec(json.loads(Path(args.spec).read_text()))
    except (OSError, ValueError) as error:
        sys.stderr.write(f"backfill job: bad spec {args.spec}: {error}\n")
        return 2
    pipe = None
    if args.parent_pipe:
        pipe = ParentPipe()
        pipe.start()
    return run(spec, parent_pipe=pipe, started=started)


if __name__ == "__main__":
    sys.exit(main())
