"""Spark backfill remediation: the runner of one backfill, without the
database (the executor of ``backfill`` jobs, ``tasks.backfill.executor``, the
command line and the bench share it).

The Spark job (``tasks.spark.backfill_job``) runs outside the worker, with
a time limit (BACKFILL_TIMEOUT_SECONDS): on the long-lived Spark host
(``tasks.spark.host``, a warm JVM) when BACKFILL_SPARK_HOST names one that
answers, otherwise in a Spark process of its own started here
(``tasks.backfill.launch``). A JVM crash or an out-of-memory kill ends that
process or the host, never the worker. The job gets explicit arguments (a
JSON spec; the SASL password in its environment, or over the host's socket)
and reports through two files: progress (records done of total) and result
(per partition, what the sink holds and which offsets are missing).

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
- A job process killed by a signal (not by our time limit), or a Spark host
  that dies during the job, is run once more at once with a fresh attempt
  (in its own process if the host is gone); a second kill fails the job.
  A job that times out on the host is cancelled there when this process
  hangs up, and publishes nothing.
- A worker killed mid-job: see ``tasks.backfill.executor``.

Over 400 lines on purpose: ``BackfillRunner`` carries one run's state
(request, adapter, attempts, deadline) through preflight, the job process
and the explanation; split, each part would reach into the others' state.
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

from groups.domain.backfill import PreparedRange, condense_error, explain_missing, partition_report
from groups.domain.planning import BackfillRange, PlanError
from groups.domain.secrets import secret_redact
from groups.domain.sinks import DEFAULT_SINK, HANDLER, KAFKA, PARQUET, replay_topic_for
from groups.models import Cluster
from tasks.backfill.launch import HostedJob, HostUnavailable, JobProcess
from tasks.kafka.adapter import ClusterConfig, KafkaAdapter, KafkaUnavailable, TopicDetails
from tasks.spark.spec import PASSWORD_ENV

log = logging.getLogger(__name__)

# A job process killed by a signal that we did not send is run this many times in all.
MAX_ATTEMPTS = 2
PROGRESS_POLL_SECONDS = 0.5
# At most this long to read the holes back with both readers when explaining them.
PROBE_SECONDS = 300.0
KAFKA_PATIENCE_SECONDS = 60.0
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
    the job id, so a re-run replaces its own output. ``topic_ids`` (optional)
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
    # The Spark host's Unix socket (tasks.spark.host); empty: every attempt in a process of its own.
    spark_host: str = ""

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

    # 1. preflight

    def preflight(self) -> list[PreparedRange]:
        """Check every topic and partition exists (under the planned topic id)
        and every range ends at or below the high watermark; read the log
        starts (offsets below them are expired: reported, not read)."""
        prepared = []
        by_topic: dict[str, list[BackfillRange]] = {}
        for r in self.request.ranges:
            by_topic.setdefault(r.topic, []).append(r)
        for topic, ranges in sorted(by_topic.items()):
            details = _patiently(lambda: self.adapter.describe_topic(topic))
            if details is None:
                raise PlanError(f"topic {topic!r} does not exist on this cluster")
            planned_id = self.request.topic_ids.get(topic)
            if planned_id and details.topic_id and planned_id != details.topic_id:
                raise PlanError(f"topic {topic!r} was deleted and recreated since the plan "
                                f"(topic id {details.topic_id}, planned {planned_id}): its offsets mean other records")
            unknown = sorted(r.partition for r in ranges if r.partition >= details.partitions)
            if unknown:
                raise PlanError(f"topic {topic!r} has no partition {', '.join(map(str, unknown))} "
                                f"(it has {details.partitions})")
            offsets = self._offsets(topic, [r.partition for r in ranges])
            for r in ranges:
                now = offsets[r.partition]
                if r.end > now.high_watermark:
                    raise PlanError(f"{topic}[{r.partition}]: the range ends at {r.end}, beyond the high watermark "
                                    f"{now.high_watermark}: those records do not exist (truncated or recreated?)")
                prepared.append(PreparedRange(r, log_start=now.log_start, high_watermark=now.high_watermark))
        return prepared

    def prepare_replay(self, prepared: list[PreparedRange]) -> dict:
        """Create missing replay topics with the source's partition count and
        replication factor (partition p is replayed to partition p); read
        where each replay partition ends now, to count this job's records."""
        topics = {topic: replay_topic_for(topic, self.request.replay_topics.get(topic, ""))
                  for topic in sorted({p.range.topic for p in prepared})}
        start_offsets: dict[str, dict[str, int]] = {}
        for source, replay in topics.items():
            if replay == source:
                raise PlanError(f"the replay topic of {source!r} cannot be the topic itself")
            needed = 1 + max(p.range.partition for p in prepared if p.range.topic == source)
            details = self.adapter.describe_topic(replay)
            if details is None:
                source_details = self.adapter.describe_topic(source)
                self.adapter.create_topic(replay, partitions=source_details.partitions,
                                  replication_factor=source_details.replication_factor)
                details = self._wait_for_topic(replay)
            if details.partitions < needed:
                raise PlanError(f"replay topic {replay!r} has {details.partitions} partitions; partition "
                                f"{needed - 1} of {source!r} needs at least {needed}: raise its partition count")
            offsets = self._offsets(replay, list(range(details.partitions)))
            start_offsets.setdefault(replay, {}).update(
                {str(p): offsets[p].high_watermark for p in range(details.partitions)})
        return {"kind": KAFKA, "topics": topics, "start_offsets": start_offsets}

    def _wait_for_topic(self, topic: str) -> TopicDetails:
        for _ in range(50):
            details = self.adapter.describe_topic(topic)
            if details is not None:
                return details
            time.sleep(0.2)
        raise KafkaUnavailable(f"replay topic {topic!r} was created but does not show up", stage="backfill")

    def _offsets(self, topic: str, partitions: list[int]):
        return _patiently(lambda: self.adapter.partition_offsets(topic=topic, partitions=partitions))

    # 2. the job process

    def run(self) -> dict:
        prepared = self.preflight()
        readable = [p for p in prepared if p.to_read > 0]
        to_read = sum(p.to_read for p in readable)
        self.on_progress(0, to_read)
        if self.request.sink == KAFKA:
            sink = self.prepare_replay(prepared)
        elif self.request.sink == HANDLER:
            sink = {"kind": HANDLER, "handler": self.request.handler}
        else:
            output = self.request.output or str(settings.BACKFILL_OUTPUT)
            if "://" not in output:
                output = str(Path(output).absolute())
                Path(output).mkdir(parents=True, exist_ok=True)
            sink = {"kind": PARQUET, "output": output}
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
                            error=killed.record.get("log_tail", ""), result=self._result(sink, []),
                        ) from None
                    log.warning("backfill %s: job process killed by %s; running it again",
                                self.request.run_id, killed.signal_name)
        report = outcome.get("report") or self._report(prepared, {}, compacted, probe=False)
        result = self._result(outcome.get("sink", sink), report, outcome.get("timings"))
        if any(p["unexplained"] or p["problems"] for p in report):
            problems = "; ".join(f"{p['topic']}[{p['partition']}]: {', '.join(p['problems'])}"
                                 for p in report if p["problems"])
            raise BackfillFailed(f"unexplained difference: {problems}", result=result)
        return result

    def _result(self, sink: dict, report: list[dict], timings: dict | None = None) -> dict:
        result = {
            "sink": {key: value for key, value in sink.items() if key != "start_offsets"},
            "expected": sum(r.count for r in self.request.ranges),
            "delivered": sum(p["delivered"] for p in report),
            "partitions": report,
            "attempts": self.attempts,
            "seconds": round(time.time() - self.started, 3),
        }
        if timings:
            result["timings"] = timings
        return result

    def _spec(self, attempt: str, readable: list[PreparedRange], sink: dict, workdir: Path) -> dict:
        config = self.request.cluster
        return {
            "job_id": self.request.run_id,
            "attempt": attempt,
            "kafka": {"bootstrap_servers": config.bootstrap_servers, "security_protocol": config.security_protocol,
                      "sasl_mechanism": config.sasl_mechanism, "sasl_username": config.sasl_username},
            "ranges": [{"topic": p.range.topic, "partition": p.range.partition, "start": p.read_start,
                        "end": p.range.end} for p in readable],
            "sink": sink,
            "spark": {"master": self.request.master, "jars_dir": str(settings.SPARK_KAFKA_JARS_DIR),
                      "driver_memory": "768m", "records_per_task": RECORDS_PER_TASK},
            "progress_file": str(workdir / "progress.json"),
            "result_file": str(workdir / "result.json"),
        }

    def _attempt(self, readable: list[PreparedRange], sink: dict, compacted: dict[str, bool]) -> dict:
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
        (workdir / "spec.json").write_text(json.dumps(spec, indent=1))
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
            job = self._launch(workdir / "spec.json", environment, log_file, record)
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
                        report = self._report_from(staged, readable, compacted)
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
                result=self._result(sink, []))
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
                                 result=self._result(sink, []))
        record["outcome"] = outcome["status"]
        self.on_attempt(self.attempts)
        if explain_error is not None:
            raise BackfillFailed(f"could not explain the missing offsets, so nothing was published: {explain_error}",
                                 result=self._result(sink, []))
        if report is None:  # kafka and handler sinks: delivered as they went
            report = self._report_from(outcome, readable, compacted)
        # A discarded output comes with problems in the report: run() fails the job with them.
        return {"report": self._with_unread(report, readable), "sink": outcome.get("sink") or sink,
                "timings": record["timings"]}

    def _launch(self, spec_path: Path, environment: dict, log_file, record: dict):
        """On the Spark host when one is configured and answers; in a process
        of its own otherwise (the host is a speed-up, never a dependency)."""
        if self.request.spark_host:
            try:
                return HostedJob(socket_path=self.request.spark_host, spec_path=spec_path,
                                 password=self.request.cluster.sasl_password)
            except HostUnavailable as error:
                log.warning("backfill %s: %s; running the job in its own process", self.request.run_id, error)
                record["host_unavailable"] = str(error)
        return JobProcess(spec_path=spec_path, cwd=BASE_DIR, environment=environment, log_file=log_file)

    # 3. explaining

    def _report_from(self, staged: dict, readable: list[PreparedRange], compacted: dict[str, bool]) -> list[dict]:
        summaries = {(s["topic"], s["partition"]): s for s in staged.get("partitions", [])}
        return self._report(readable, summaries, compacted, probe=True)

    def _report(self, prepared: list[PreparedRange], summaries: dict, compacted: dict[str, bool], *,
                probe: bool) -> list[dict]:
        """Per prepared range: log start now, then label each hole; only holes
        above the log start need the two readers (and the topic's cleanup
        policy)."""
        log_starts: dict[tuple[str, int], int] = {}
        for topic in sorted({p.range.topic for p in prepared}):
            partitions = [p.range.partition for p in prepared if p.range.topic == topic]
            for partition, offsets in self._offsets(topic, partitions).items():
                log_starts[(topic, partition)] = offsets.log_start
        report = []
        for p in prepared:
            key = (p.range.topic, p.range.partition)
            summary = summaries.get(key)
            log_start = log_starts[key]
            holes = [tuple(h) for h in summary["holes"]] if summary else []
            above = [(max(a, log_start), b) for a, b in holes if b > log_start]
            committed_runs: list = []
            uncommitted_runs: list = []
            if above and probe:
                span_start, span_end = above[0][0], above[-1][1]
                deadline = min(self.deadline, time.monotonic() + PROBE_SECONDS)
                committed_runs = self.adapter.visible_runs(topic=key[0], partition=key[1], start=span_start,
                                                         end=span_end, committed_only=True, deadline=deadline)
                uncommitted_runs = self.adapter.visible_runs(topic=key[0], partition=key[1], start=span_start,
                                                           end=span_end, committed_only=False, deadline=deadline)
                if key[0] not in compacted:
                    compacted[key[0]] = self.adapter.topic_compacted(key[0])
            labelled = explain_missing(holes=holes, log_start=log_start, committed_runs=committed_runs,
                                       uncommitted_runs=uncommitted_runs, compacted=compacted.get(key[0], False))
            report.append(partition_report(p, summary, log_start_after=log_start, labelled=labelled))
        extra = [s for k, s in summaries.items() if k not in {(p.range.topic, p.range.partition) for p in prepared}]
        for s in extra:  # records of a partition the job did not ask for
            report.append({"topic": s["topic"], "partition": s["partition"], "start": 0, "end": 0, "expected": 0,
                           "delivered": 0, "explained": {}, "unexplained": s["outside_range"],
                           "problems": [f"{s['outside_range']} records of a partition not in the plan"],
                           "missing_ranges": []})
        return report

    def _with_unread(self, report: list[dict], readable: list[PreparedRange]) -> list[dict]:
        """Add the partitions that were not read at all (entirely expired)."""
        done = {(p["topic"], p["partition"]) for p in report}
        missing = [r for r in self.request.ranges if (r.topic, r.partition) not in done]
        if not missing:
            return report
        offsets: dict[tuple[str, int], int] = {}
        for topic in sorted({r.topic for r in missing}):
            for partition, now in self._offsets(topic, [r.partition for r in missing if r.topic == topic]).items():
                offsets[(topic, partition)] = now.log_start
        for r in missing:
            prepared = PreparedRange(r, log_start=offsets[(r.topic, r.partition)], high_watermark=r.end)
            report.append(partition_report(prepared, None, log_start_after=prepared.log_start, labelled=[]))
        return sorted(report, key=lambda p: (p["topic"], p["partition"]))


def _patiently(call: Callable, *, seconds: float = KAFKA_PATIENCE_SECONDS):
    """Call again on KafkaUnavailable, with backoff, for up to ``seconds``:
    a leader moving or a broker restarting must not fail a job whose data
    is already written and waiting to be explained."""
    deadline = time.monotonic() + seconds
    wait = 0.1
    while True:
        try:
            return call()
        except KafkaUnavailable:
            if time.monotonic() + wait > deadline:
                raise
            time.sleep(wait)
            wait = min(wait * 2, 5.0)


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


def cluster_request(*, cluster: Cluster, ranges: list[BackfillRange], sink: str, run_id: str,
                    replay_topic: str = "", handler: str = "") -> BackfillRequest:
    """A request for the command line: no job row, the output named ``run_id``."""
    return BackfillRequest(
        run_id=run_id, cluster=cluster.client_config(), ranges=tuple(ranges), sink=sink,
        replay_topics={r.topic: replay_topic for r in ranges} if replay_topic else {}, handler=handler,
        output=str(settings.BACKFILL_OUTPUT), timeout_seconds=settings.BACKFILL_TIMEOUT_SECONDS,
        master=settings.SPARK_MASTER, spark_host=settings.BACKFILL_SPARK_HOST,
    )
