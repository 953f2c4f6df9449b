"""The Spark backfill job: reads exactly ``[start, end)`` of each partition
with Spark's Kafka source and delivers it to one sink (``adapters.spark.sinks``).

Run in its own process, with explicit arguments only (no Django, no ORM)::

    python -m adapters.spark.backfill_job --spec SPEC.json [--parent-pipe]

or, with the same spec, on a session of a Spark Connect server
(``tasks.backfill.launch.ConnectJob`` calls ``run`` with the session).

The spec is ``adapters.spark.spec.JobSpec`` (its JSON form is described there),
the one contract with the runner that writes it.

The secrets (SASL password, client key and its password, OAuth client
secret: ``spec.KafkaSecrets``) are read from the environment variable
``GAPWATCH_KAFKA_SECRETS``, never from the spec or the command line, removed
from the environment before Spark starts (its JVM and Python workers inherit
it), and replaced by ``***`` in any error text the job writes.

While it runs, the job rewrites ``progress_file`` (phase, records done of
total, estimated from completed Spark tasks: ``adapters.spark.progress``). At
the end it writes ``result_file``: status, the per-partition summary of what
the sink holds (``counting.partition_summary``), timings (epoch seconds)
and, on failure, the error text.

With ``--parent-pipe`` (how ``tasks.backfill.runner`` runs it) a Parquet job
stages its output and waits on stdin for the runner's ``publish`` or
``discard``: the protocol is ``adapters.spark.handshake``. Without it, staged
output is published unless it holds duplicates or records outside the range.

Exit codes: 0 done (see the result's status), 1 failed (the result holds the
error), 2 bad arguments or spec, 3 the parent went away
(``handshake.EXIT_PARENT_GONE``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

from groups.domain.secrets import secret_redact
from groups.domain.sinks import KAFKA, PARQUET
from adapters.spark.connect import job_tag
from adapters.spark.handshake import (
    DELIVERED,
    DISCARDED,
    PUBLISH,
    PUBLISHED,
    ParentPipe,
    ProgressFile,
    await_decision,
    write_json,
)
from adapters.spark.progress import tracked
from adapters.spark.reader import REDACTION_REGEX, SESSION_REDACTION, kafka_options, read_ranges
from adapters.spark.session import is_connect, sql_api
from adapters.spark.spec import SECRETS_ENV, JobSpec, KafkaSecrets, min_partitions, parse_spec

# Static Spark settings the shared session builder does not set: no console
# progress bar in the log, and the options holding secrets (JAAS, the client
# key and its password) redacted wherever Spark prints options.
SUBMIT_ARGS = (
    "--conf spark.ui.showConsoleProgress=false "
    f"--conf spark.redaction.regex={REDACTION_REGEX} "
    "pyspark-shell"
)
ERROR_TEXT_LIMIT = 100_000

log = logging.getLogger("gapwatch.backfill_job")


def session_parallelism(spark) -> int:
    """How many tasks the session runs at once. A Connect client cannot ask
    the SparkContext: it reads ``spark.default.parallelism`` (set by
    ``adapters.spark.connect`` for local masters), or else counts the
    partitions Spark gives a plain range (its default parallelism)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    F, _ = sql_api(spark)  # noqa: N806
    row = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p").alias("p")).first()
    return int(row.p) + 1


def error_text(error: BaseException, secrets: KafkaSecrets) -> str:
    """The exception as Spark gives it (for a JVM error: the Java exception,
    its message and stack with every ``Caused by``), every secret masked."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return secret_redact(text, *secrets.values)[:ERROR_TEXT_LIMIT]


def make_sink(spark, spec: JobSpec, options: dict[str, str]):
    from adapters.spark.sinks.handler import HandlerSink
    from adapters.spark.sinks.kafka import KafkaSink
    from adapters.spark.sinks.parquet import ParquetSink

    if spec.sink.kind == PARQUET:
        return ParquetSink(spark, output=spec.sink.output, job_id=spec.job_id, attempt=spec.attempt)
    if spec.sink.kind == KAFKA:
        return KafkaSink(spark, kafka_options=options, topics=dict(spec.sink.topics),
                         start_offsets={t: dict(o) for t, o in spec.sink.start_offsets.items()},
                         job_id=spec.job_id, attempt=spec.attempt)
    return HandlerSink(spark, handler=spec.sink.handler)


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


def run(spec: JobSpec, *, parent_pipe, started: float, spark=None, secrets: KafkaSecrets | None = None) -> int:
    """One attempt of the job:

    1. Start Spark with the local connector jars, or use ``spark``, a Spark
       Connect session (``tasks.backfill.launch.ConnectJob``); every
       operation then carries the attempt's tag.
    2. The sink removes this job's stale staging.
    3. Read the ranges and write them (``progress.tracked``: progress from
       completed tasks).
    4. Count what the sink holds.
    5. Settle (``_settle``): a sink that publishes stages, waits for the
       runner's decision (``adapters.spark.handshake``) and publishes or
       discards; the others delivered as they wrote.

    ``parent_pipe``: the decision channel (``handshake.ParentPipe`` or
    ``handshake.Decision``); None decides alone. ``secrets`` default to the
    environment (``spec.SECRETS_ENV``)."""
    if secrets is None:
        secrets = KafkaSecrets.from_environment(os.environ)
        os.environ.pop(SECRETS_ENV, None)
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
            spark = _own_session(spec)
        connect = is_connect(spark)
        if connect:
            # Every operation of this attempt, so the executor can interrupt them.
            spark.addTag(tag)
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        # Before any operation carries the options: a Connect server prints each plan whole.
        for key, value in SESSION_REDACTION.items():
            spark.conf.set(key, value)
        parallelism = session_parallelism(spark)
        result["min_partitions"] = min_partitions(spec, parallelism)
        timings["session_ready"] = time.time()
        options = kafka_options(spec.kafka, secrets)
        sink = make_sink(spark, spec, options)
        result["sink"] = sink.describe()
        sink.prepare()
        with tracked(spark, progress, connect=connect, tag=tag,
                     description=f"backfill {spec.job_id} attempt {spec.attempt}"):
            timings["write_started"] = time.time()
            sink.write(read_ranges(spark, spec, options, parallelism=parallelism))
        timings["written"] = time.time()
        progress.write("verifying", spec.total)
        result["partitions"] = sink.summarize(spec.ranges)
        result["verified_by"] = sink.verified_by
        timings["verified"] = time.time()
        result["status"] = _settle(sink, spec, result=result, parent_pipe=parent_pipe, progress=progress)
        timings["finished"] = time.time()
        write_json(spec.result_file, result)
        progress.write("done", spec.total)
        return 0
    except Exception as error:  # noqa: BLE001 - any failure is reported through the result file
        log.error("backfill %s attempt %s failed", spec.job_id, spec.attempt, exc_info=True)
        result["status"] = "failed"
        result["error"] = error_text(error, secrets)
        if sink is not None:
            try:
                sink.discard()
            except Exception:  # noqa: BLE001 - the next attempt removes stale staging anyway
                log.warning("could not remove the staged output", exc_info=True)
        write_json(spec.result_file, result)
        progress.write("failed", 0)
        return 1
    finally:
        if own_session and spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass


def _own_session(spec: JobSpec):
    """A Spark session of this process, with the local connector jars."""
    from adapters.spark.session import build_session

    prepare_process_environment()
    spark = build_session(master=spec.master, app_name=f"gapwatch-backfill-{spec.job_id}",
                          jars_dir=Path(spec.jars_dir), driver_memory=spec.driver_memory)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _settle(sink, spec: JobSpec, *, result: dict, parent_pipe, progress: ProgressFile) -> str:
    """Step 5: the status of the finished attempt. A sink that publishes
    waits for the decision (``handshake.await_decision``), then publishes its
    output with a manifest, or discards it."""
    if not sink.needs_publish:
        return DELIVERED
    decision = await_decision(channel=parent_pipe, result=result, result_file=spec.result_file, progress=progress)
    if decision != PUBLISH:
        sink.discard()
        return DISCARDED
    sink.publish({"job_id": spec.job_id, "attempt": spec.attempt, "ranges": spec.ranges_json(),
                  "partitions": [{k: v for k, v in p.items() if k != "holes"} for p in result["partitions"]],
                  "published_at": time.time()})
    return PUBLISHED


def main(argv: list[str] | None = None) -> int:
    started = time.time()
    parser = argparse.ArgumentParser(prog="python -m adapters.spark.backfill_job", description=__doc__.split("\n")[0])
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
