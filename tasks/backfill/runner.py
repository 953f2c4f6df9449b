"""Spark backfill remediation: the runner of one backfill, without the
database (the executor of ``backfill`` jobs, ``tasks.backfill.executor``, the
command line and the bench share it): preflight, the Spark job's attempts,
verification. What the cluster says before and after the job is
``tasks.backfill.checks``; the spec the job is given is
``tasks.spark.spec.JobSpec``.

The Spark job (``tasks.spark.backfill_job``) runs with a time limit
(BACKFILL_TIMEOUT_SECONDS) and never in the worker's JVM (it has none): on
a session of a Spark Connect server (a warm JVM, local or on a cluster)
when SPARK_CONNECT_URL names one that answers, otherwise in a Spark process
of its own started here (``tasks.backfill.launch``). A JVM crash or an
out-of-memory kill ends that process or the server, never the worker. The
job gets explicit arguments (a JSON spec; the SASL password in its
environment, or as an argument of ``run``) and reports through two files:
progress (records done of total) and result (per partition, what the sink
holds and which offsets are missing).

A job succeeds only when every partition holds exactly ``[start, end)``, or
each missing offset is explained (``explain_missing``):

- **retention**: below the partition's log start, read after the job (the
  log start only moves forward, so anything below it is gone for good);
- **aborted_transaction**: visible to a read_uncommitted reader but not to a
  read_committed one (the job reads committed records only);
- **transaction_markers**: invisible to both readers on a topic without
  compaction: commit/abort markers take an offset but are never delivered;
- **compaction_or_markers**: invisible to both on a compacted topic; a
  client cannot tell a compacted-away record from a marker.

An offset a read_committed reader sees now but the sink does not hold, a
duplicate, or a record outside the range is unexplained: the job fails and a
Parquet output is discarded, not published.

Re-runs and kills:

- A Parquet job writes to a staging folder of its attempt and waits, on its
  stdin, for this process to say ``publish`` (after explaining) or
  ``discard``; publishing swaps the folder in as ``<output>/<job id>/``, so a
  re-run replaces the previous output and never adds a second copy. If this
  process dies, the job's stdin closes and it exits unpublished.
- A job process killed by a signal (not by our time limit), or a Spark
  Connect server that dies during the job, is run once more at once with a
  fresh attempt (in its own process if no server answers); a second kill
  fails the job. A job that times out on the server has its operations
  interrupted by tag, and publishes nothing.
- A worker killed mid-job: see ``tasks.backfill.executor``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from groups.domain.backfill import PreparedRange, condense_error
from groups.domain.cluster_config import ClusterConfig
from groups.domain.planning import BackfillRange
from groups.domain.secrets import secret_redact
from groups.domain.sinks import DEFAULT_SINK, HANDLER, KAFKA, PARQUET
from tasks.backfill.checks import ClusterChecks
from tasks.backfill.launch import ConnectJob, JobProcess
from tasks.spark.connect import ConnectUnavailable
from tasks.kafka.adapter import KafkaAdapter
from tasks.spark.spec import PASSWORD_ENV, JobSpec, KafkaSettings, SinkSpec

log = logging.getLogger(__name__)

# A job process killed by a signal that we did not send is run this many times in all.
MAX_ATTEMPTS = 2
PROGRESS_POLL_SECONDS = 0.5
# Each attempt's spec, progress, result and log live in <tmp>/<prefix><run id>-<random>/.
WORKDIR_PREFIX = "gapwatch-backfill-"
# Ranges bigger than this are split across Spark tasks (minPartitions); also
# the grain of the progress estimate.
RECORDS_PER_TASK = 200_000
BASE_DIR = Path(__file__).resolve().parents[2]


class BackfillFailed(Exception):
    """The backfill did not deliver its range; ``result`` holds what is known
    (attempts, per-partition counts), ``reason`` one line for the operator."""

    def __init__(self, reason: str, *, error: str = "", result: dict | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error or reason
        self.result = result or {}


@dataclass(frozen=True)
class BackfillRequest:
    """Everything a run needs, without the database.

    ``run_id`` names the Parquet output folder (``<BACKFILL_OUTPUT>/<run_id>``):
    the job id, so a re-run replaces its own output. ``sink``,
    ``replay_topics`` (kafka: each source topic's replay topic) and
    ``handler`` are the sink decided when the job was planned
    (``groups.domain.sinks.BackfillSink``). ``topic_ids`` (optional)
    are the topic ids the plan was made for: a topic deleted and recreated
    since then is refused."""

    run_id: str
    cluster: ClusterConfig
    ranges: tuple[BackfillRange, ...]
    sink: str = DEFAULT_SINK
    replay_topics: dict[str, str] = field(default_factory=dict)
    handler: str = ""
    topic_ids: dict[str, str] = field(default_factory=dict)
    output: str = ""
    timeout_seconds: int = 3600
    master: str = "local[*]"
    # A Spark Connect server (sc://host:port) and its token; empty: every attempt in a process of its own.
    spark_connect: str = ""
    spark_connect_token: str = field(default="", repr=False)

    @property
    def total(self) -> int:
        return sum(r.count for r in self.ranges)


# -- running the Spark job process ------------------------------------------------


class _AttemptKilled(Exception):
    def __init__(self, signal_name: str, record: dict) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.record = record


class BackfillRunner:
    """Runs one backfill: preflight against the cluster, the Spark job process
    (re-run once if a signal kills it), explanation, publish or discard.

    ``on_progress(done, total)`` and ``on_attempt(attempts)`` let the caller
    record progress and the attempts (with the job process id) as they happen.
    """

    def __init__(self, request: BackfillRequest, *, on_progress: Callable[[int, int], None] | None = None,
                 on_attempt: Callable[[list[dict]], None] | None = None) -> None:
        self.request = request
        self.on_progress = on_progress or (lambda done, total: None)
        self.on_attempt = on_attempt or (lambda attempts: None)
        self.adapter = KafkaAdapter(request.cluster, timeout=settings.KAFKA_TIMEOUT_SECONDS)
        self.attempts: list[dict] = []
        self.started = time.time()
        self.deadline = time.monotonic() + request.timeout_seconds
        self.checks = ClusterChecks(self.adapter, ranges=request.ranges, topic_ids=request.topic_ids,
                                    replay_topics=request.replay_topics, deadline=self.deadline)

    def preflight(self) -> list[PreparedRange]:
        """The ranges as the cluster has them now (``ClusterChecks.preflight``)."""
        return self.checks.preflight()

    # 2. the job process

    def run(self) -> dict:
        prepared = self.preflight()
        readable = [p for p in prepared if p.to_read > 0]
        to_read = sum(p.to_read for p in readable)
        self.on_progress(0, to_read)
        if self.request.sink == KAFKA:
            sink = self.checks.prepare_replay(prepared)
        elif self.request.sink == HANDLER:
            sink = SinkSpec(HANDLER, handler=self.request.handler)
        else:
            output = self.request.output or str(settings.BACKFILL_OUTPUT)
            if "://" not in output:
                output = str(Path(output).absolute())
                Path(output).mkdir(parents=True, exist_ok=True)
            sink = SinkSpec(PARQUET, output=output)
        compacted: dict[str, bool] = {}
        outcome: dict = {}
        if readable:
            while True:
                try:
                    outcome = self._attempt(readable, sink, compacted)
                    break
                except _AttemptKilled as killed:
                    if len(self.attempts) >= MAX_ATTEMPTS:
                        raise BackfillFailed(
                            f"the job process was killed ({killed.signal_name}) in {len(self.attempts)} attempts",
                            error=killed.record.get("log_tail", ""), result=self._result(sink.describe(), []),
                        ) from None
                    log.warning("backfill %s: job process killed by %s; running it again",
                                self.request.run_id, killed.signal_name)
        report = outcome.get("report") or self.checks.report(prepared, {}, compacted, probe=False)
        result = self._result(outcome.get("sink") or sink.describe(), report, outcome.get("timings"))
        if any(p["unexplained"] or p["problems"] for p in report):
            problems = "; ".join(f"{p['topic']}[{p['partition']}]: {', '.join(p['problems'])}"
                                 for p in report if p["problems"])
            raise BackfillFailed(f"unexplained difference: {problems}", result=result)
        return result

    def _result(self, sink: dict, report: list[dict], timings: dict | None = None) -> dict:
        result = {
            "sink": sink,
            "expected": sum(r.count for r in self.request.ranges),
            "delivered": sum(p["delivered"] for p in report),
            "partitions": report,
            "attempts": self.attempts,
            "seconds": round(time.time() - self.started, 3),
        }
        if timings:
            result["timings"] = timings
        return result

    def _spec(self, attempt: str, readable: list[PreparedRange], sink: SinkSpec, workdir: Path) -> JobSpec:
        config = self.request.cluster
        return JobSpec(
            job_id=self.request.run_id, attempt=attempt,
            kafka=KafkaSettings(bootstrap_servers=config.bootstrap_servers, security_protocol=config.security_protocol,
                                sasl_mechanism=config.sasl_mechanism, sasl_username=config.sasl_username),
            ranges=tuple(BackfillRange(p.range.topic, p.range.partition, p.read_start, p.range.end)
                         for p in readable),
            sink=sink, master=self.request.master, jars_dir=str(settings.SPARK_KAFKA_JARS_DIR),
            records_per_task=RECORDS_PER_TASK,
            progress_file=str(workdir / "progress.json"), result_file=str(workdir / "result.json"),
        )

    def _attempt(self, readable: list[PreparedRange], sink: SinkSpec, compacted: dict[str, bool]) -> dict:
        """One run of the job process.

        1. Write the spec; start ``python -m tasks.spark.backfill_job`` in a
           new session (so a time-out kills its JVM too), stdin a pipe.
        2. Until it exits: pass progress on; when a Parquet job has staged
           its output, explain what is missing and answer publish/discard.
        3. Exit 0: the result file says what was delivered. Killed by a
           signal: ``_AttemptKilled``. Anything else: BackfillFailed with
           Spark's error text.
        """
        attempt = uuid.uuid4().hex[:12]
        workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.request.run_id}-"))
        spec = self._spec(attempt, readable, sink, workdir)
        (workdir / "spec.json").write_text(json.dumps(spec.to_json(), indent=1))
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(BASE_DIR), os.environ.get("PYTHONPATH")) if p)}
        environment.pop(PASSWORD_ENV, None)
        if self.request.cluster.sasl_password:
            environment[PASSWORD_ENV] = self.request.cluster.sasl_password
        log_path = workdir / "job.log"
        record = {"attempt": attempt, "started_at": timezone.now().isoformat(), "pid": None, "outcome": "running"}
        self.attempts.append(record)
        spawned = time.time()
        with open(log_path, "wb") as log_file:
            job = self._launch(spec, workdir / "spec.json", environment, log_file, record)
        record["pid"] = job.pid
        record["mode"] = job.mode
        self.on_attempt(self.attempts)
        report: list[dict] | None = None
        explain_error: Exception | None = None
        timed_out = False
        try:
            last_progress = None
            while job.poll() is None:
                if time.monotonic() > self.deadline:
                    timed_out = True
                    job.stop()
                    break
                progress = _read_json(workdir / "progress.json")
                if progress and (progress.get("done"), progress.get("total")) != last_progress:
                    last_progress = (progress.get("done"), progress.get("total"))
                    self.on_progress(int(progress.get("done") or 0), int(progress.get("total") or 0))
                if progress and progress.get("phase") == "staged" and report is None and explain_error is None:
                    staged = _read_json(workdir / "result.json") or {}
                    try:
                        report = self.checks.report_from(staged, readable, compacted)
                        decision = "discard" if any(p["unexplained"] or p["problems"] for p in report) else "publish"
                    except Exception as error:  # noqa: BLE001 - no explanation, no publication
                        explain_error = error
                        decision = "discard"
                    job.send(decision)
                time.sleep(PROGRESS_POLL_SECONDS)
            returncode = job.wait()
        finally:
            job.stop()
        outcome = _read_json(workdir / "result.json") or {}
        log_tail = _tail(log_path)
        shutil.rmtree(workdir, ignore_errors=True)
        record["ended_at"] = timezone.now().isoformat()
        record["returncode"] = returncode
        record["timings"] = _timings(outcome.get("timings") or {}, spawned)
        if timed_out:
            record["outcome"] = "timed out"
            self.on_attempt(self.attempts)
            raise BackfillFailed(
                f"the job process ran longer than {self.request.timeout_seconds}s and was killed; nothing published",
                error=secret_redact(log_tail, self.request.cluster.sasl_password),
                result=self._result(sink.describe(), []))
        finished = outcome.get("status") in ("published", "delivered", "discarded")
        lost = job.lost()
        if lost and not finished:
            record["outcome"] = f"killed by {lost}"
            record["log_tail"] = secret_redact(log_tail[-2000:], self.request.cluster.sasl_password)
            self.on_attempt(self.attempts)
            raise _AttemptKilled(lost, record)
        if returncode != 0 and finished:
            # Its result was complete (and any output published) before the process died on its way out.
            log.warning("backfill %s: job process exited with %s after finishing", self.request.run_id, returncode)
        elif returncode != 0 or not finished:
            record["outcome"] = "failed"
            self.on_attempt(self.attempts)
            error = (outcome.get("error") or getattr(job, "error", "") or log_tail
                     or f"the job process exited with code {returncode}")
            raise BackfillFailed(f"the Spark job failed (exit code {returncode})",
                                 error=condense_error(secret_redact(error, self.request.cluster.sasl_password)),
                                 result=self._result(sink.describe(), []))
        record["outcome"] = outcome["status"]
        self.on_attempt(self.attempts)
        if explain_error is not None:
            raise BackfillFailed(f"could not explain the missing offsets, so nothing was published: {explain_error}",
                                 result=self._result(sink.describe(), []))
        if report is None:  # kafka and handler sinks: delivered as they went
            report = self.checks.report_from(outcome, readable, compacted)
        # A discarded output comes with problems in the report: run() fails the job with them.
        return {"report": self.checks.with_unread(report, readable), "sink": outcome.get("sink") or sink.describe(),
                "timings": record["timings"]}

    def _launch(self, spec: JobSpec, spec_path: Path, environment: dict, log_file, record: dict):
        """On the Spark Connect server when one is configured and answers; in
        a process of its own otherwise (the server is a speed-up, never a
        dependency)."""
        if self.request.spark_connect:
            try:
                job = ConnectJob(url=self.request.spark_connect, token=self.request.spark_connect_token, spec=spec,
                                 password=self.request.cluster.sasl_password, log_file=log_file)
                record.update(server=job.server, session_id=job.session_id, tag=job.tag)
                return job
            except ConnectUnavailable as error:
                log.warning("backfill %s: %s; running the job in its own process", self.request.run_id, error)
                record["connect_unavailable"] = str(error)
        return JobProcess(spec_path=spec_path, cwd=BASE_DIR, environment=environment, log_file=log_file)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _tail(path: Path, size: int = 16_000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _timings(raw: dict, spawned: float) -> dict:
    """Seconds of each phase of one attempt, from the job's epoch timestamps."""
    points = [("startup", spawned, raw.get("session_ready")), ("write", raw.get("write_started"), raw.get("written")),
              ("verify", raw.get("written"), raw.get("verified")), ("finish", raw.get("verified"), raw.get("finished"))]
    return {name: round(end - start, 3) for name, start, end in points if start and end}


def run_backfill(request: BackfillRequest, **callbacks) -> dict:
    """Run a backfill without the database (the command line and the bench
    use it). Raises PlanError (bad plan), KafkaUnavailable, BackfillFailed."""
    return BackfillRunner(request, **callbacks).run()
