"""Spark backfill remediation: the runner of one backfill, without the
database (the executor of ``backfill`` jobs, ``tasks.backfill.executor``, the
command line and the bench share it): preflight, the Spark job's attempts,
verification. What the cluster says before and after the job is
``tasks.backfill.checks``; the spec the job is given is
``adapters.spark.spec.JobSpec``.

Its waits (for an open transaction to end, for the job process, the
cluster checks' retries with backoff) sleep in the backfill's driver process
(``tasks.backfill.driver``), never in a Celery worker: no poll or watcher
tick waits behind them (BACKFILL_DRIVER=worker, the tests' in-process mode,
is the exception).

The Spark job (``adapters.spark.backfill_job``) runs with a time limit
(BACKFILL_TIMEOUT_SECONDS) and never in the worker's JVM (it has none): on
a session of a Spark Connect server (a warm JVM, local or on a cluster)
when SPARK_CONNECT_URL names one that answers, otherwise in a Spark process
of its own started here (``tasks.backfill.launch``). A JVM crash or an
out-of-memory kill ends that process or the server, never the worker. The
job gets explicit arguments (a JSON spec without secrets; the secrets in its
environment, or as an argument of ``run``) and talks to this runner through
two files and a publish/discard decision (``adapters.spark.handshake``).

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

- A Parquet job stages its output and publishes it only when this process
  says so, after explaining (``adapters.spark.handshake``); publishing swaps it
  in as ``<output>/<job id>/``, so a re-run replaces the previous output and
  never adds a second copy. If this process dies, nothing is published.
- A job process killed by a signal (not by our time limit), or a Spark
  Connect server that dies during the job, is run once more at once with a
  fresh attempt (in its own process if no server answers); a second kill
  fails the job. A job that times out on the server has its operations
  interrupted by tag, and publishes nothing.
- A worker killed mid-job: see ``tasks.backfill.executor``.
"""

from __future__ import annotations

import hashlib
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

from groups.domain.backfill import PreparedRange, report_explained
from groups.domain.reasons import system_text
from groups.domain.cluster_config import ClusterConfig
from groups.domain.job_progress import backfill_stages
from groups.domain.planning import BackfillRange
from groups.domain.read_isolation import READ_COMMITTED
from groups.domain.secrets import secret_redact
from groups.domain.sinks import DEFAULT_SINK, HANDLER, KAFKA, PARQUET
from groups.domain.transaction_wait import HeldRange, OpenTransaction, abort_due_ms, held_ranges, hold_message
from tasks.backfill.checks import ClusterChecks
from tasks.backfill.launch import ConnectJob, JobProcess, launch
from adapters.kafka.adapter import KafkaUnavailable
from tasks.cluster_client import kafka_client
from adapters.kafka.transactions import TransactionReads
from adapters.spark.handshake import (
    DISCARD,
    FINISHED,
    PROGRESS_FILE,
    RESULT_FILE,
    STAGED,
    decision_for,
    read_json,
)
from adapters.spark.spec import TASKS_PER_CORE, JobSpec, KafkaSecrets, KafkaSettings, SinkSpec

log = logging.getLogger(__name__)

# A job process killed by a signal that we did not send is run this many times in all.
MAX_ATTEMPTS = 2
PROGRESS_POLL_SECONDS = 0.5
# Each attempt's spec, progress, result and log live in <tmp>/<prefix><run id>-<random>/.
WORKDIR_PREFIX = "gapwatch-backfill-"


def work_prefix(run_id: str) -> str:
    """The name every work folder of a run starts with, in the temp folder:
    the install's database first (host, port and name, hashed), then the run.
    Two installs on one machine, or the suite's two workers, number their
    jobs alike; a job clearing its dead attempts' folders must find only its
    own (it once deleted another install's live attempt)."""
    database = settings.DATABASES["default"]
    install = hashlib.sha256(f"{database.get('HOST')}:{database.get('PORT')}/{database.get('NAME')}".encode())
    return f"{WORKDIR_PREFIX}{install.hexdigest()[:8]}-{run_id}-"


# Ranges bigger than this are split across Spark tasks (minPartitions); also
# the grain of the progress estimate.
RECORDS_PER_TASK = 200_000
# At most TASKS_PER_CORE (the spec's default, imported above and sent with
# each job like RECORDS_PER_TASK) of those tasks per core (spec.min_partitions):
# a big job's tasks stay few and large. Tests that need a small range read in
# many small tasks (to stop a job between two of them) raise both here.


class BackfillFailed(Exception):
    """The backfill did not deliver its range; ``result`` holds what is known
    (attempts, per-partition counts), ``reason`` one line for the operator."""

    def __init__(self, reason: str, *, error: str = "", result: dict | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error or reason
        self.result = result or {}
        if error and error != reason:
            # Shown under the traceback (a test's failure, a worker's log): a failed job's own words, as the
            # job stores them (secrets redacted by the caller); its reason alone said "exit code 1".
            # Java puts an exception's message first and its stack after: both ends of a long one.
            self.add_note(error if len(error) <= 3000 else f"{error[:2000]}\n…\n{error[-1000:]}")


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
    # The group's isolation.level as approved (``read_isolation.reader_isolation``):
    # the job reads with it and the records are counted with it.
    isolation: str = READ_COMMITTED
    output: str = ""
    timeout_seconds: int = 3600
    # How long a read_committed job waits for open transactions to leave its ranges
    # (BACKFILL_TRANSACTION_WAIT_SECONDS), within ``timeout_seconds``.
    transaction_wait_seconds: int = 900
    master: str = "local[*]"
    # A Spark Connect server (sc://host:port) and its token; empty: every attempt in a process of its own.
    spark_connect: str = ""
    spark_connect_token: str = field(default="", repr=False)

    @property
    def total(self) -> int:
        return sum(r.count for r in self.ranges)


class _AttemptKilled(Exception):
    def __init__(self, signal_name: str, record: dict) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.record = record


@dataclass
class _Attempt:
    """One run of the Spark job: its work folder (spec, log and the two files
    of ``adapters.spark.handshake``), its entry in the job's attempts, and the job
    itself (``JobProcess`` or ``ConnectJob``)."""

    folder: Path
    record: dict
    job: JobProcess | ConnectJob
    spawned: float
    timed_out: bool = False
    # Protocol step 3, once the staged counts are explained (or explaining failed): the decision is sent.
    decided: bool = False
    report: list[dict] | None = None
    explain_error: Exception | None = None


class BackfillRunner:
    """Runs one backfill: preflight against the cluster, the Spark job process
    (re-run once if a signal kills it), explanation, publish or discard.

    ``on_progress(done, total)`` and ``on_attempt(attempts)`` let the caller
    record progress and the attempts (with the job process id) as they happen;
    ``on_wait(reason)`` what the job waits for before it starts Spark;
    ``on_stages(stages)`` each stage's records, start and last news
    (``groups.domain.job_progress``).
    """

    def __init__(self, request: BackfillRequest, *, on_progress: Callable[[int, int], None] | None = None,
                 on_attempt: Callable[[list[dict]], None] | None = None,
                 on_wait: Callable[[str], None] | None = None,
                 on_stages: Callable[[list[dict]], None] | None = None) -> None:
        self.request = request
        self.on_stages = on_stages or (lambda stages: None)
        self.on_wait = on_wait or (lambda reason: None)
        self.transaction_wait: dict = {}
        self.secrets = KafkaSecrets.of(request.cluster)
        self.on_progress = on_progress or (lambda done, total: None)
        self.on_attempt = on_attempt or (lambda attempts: None)
        self.adapter = kafka_client(request.cluster)
        self.attempts: list[dict] = []
        self.started = time.time()
        self.deadline = time.monotonic() + request.timeout_seconds
        self.checks = ClusterChecks(self.adapter, ranges=request.ranges, topic_ids=request.topic_ids,
                                    replay_topics=request.replay_topics, deadline=self.deadline,
                                    isolation=request.isolation)

    def preflight(self) -> list[PreparedRange]:
        """The ranges as the cluster has them now (``ClusterChecks.preflight``)."""
        return self.checks.preflight()

    def run(self) -> dict:
        """1. Preflight; 2. read_committed: wait until no open transaction
        holds a range (``_wait_for_stable``); 3. where the job delivers
        (``_sink``); 4. the job's attempts (``_attempts``), unless everything
        expired already; 5. the result, or BackfillFailed unless every
        difference is explained."""
        prepared = self.preflight()
        readable = [p for p in prepared if p.to_read > 0]
        self._wait_for_stable(readable)
        self.on_progress(0, sum(p.to_read for p in readable))
        sink = self._sink(prepared)
        compacted: dict[str, bool] = {}
        outcome = self._attempts(readable, sink, compacted) if readable else {}
        report = outcome.get("report") or self.checks.report(prepared, {}, compacted, probe=False)
        result = self._result(outcome.get("sink") or sink.describe(), report, outcome.get("timings"))
        if outcome.get("verified_by"):
            result["verified_by"] = outcome["verified_by"]
        if not report_explained(report):
            problems = "; ".join(f"{p['topic']}[{p['partition']}]: {', '.join(p['problems'])}"
                                 for p in report if p["problems"])
            raise BackfillFailed(f"unexplained difference: {problems}", result=result)
        return result

    def _wait_for_stable(self, readable: list[PreparedRange]) -> None:
        """Until the last stable offset of each partition reaches its range's
        end, for at most ``transaction_wait_seconds`` (within the job's time):
        a read_committed read of an offset an open transaction holds ends
        early. While it waits, ``on_wait`` says which partition is held, from
        which offset and by which transaction (asked again only when what is
        held changes); past the bound, BackfillFailed with the same words.
        A read_uncommitted job reads up to the high watermark: no wait."""
        if self.request.isolation != READ_COMMITTED or not readable:
            return
        ranges = [BackfillRange(p.range.topic, p.range.partition, p.read_start, p.range.end) for p in readable]
        started = time.monotonic()
        limit = min(self.deadline, started + self.request.transaction_wait_seconds)
        pause = 0.2
        seen: list[HeldRange] | None = None
        transactions: list[OpenTransaction] = []
        while True:
            held = held_ranges(ranges, self._stable_offsets(ranges))
            if not held:
                if seen:
                    self.transaction_wait["seconds"] = round(time.monotonic() - started, 3)
                    self.on_wait("starting the Spark job: no open transaction holds the ranges any more")
                return
            if held != seen:
                transactions = self._open_transactions(held)
                seen = held
            now_ms = int(time.time() * 1000)
            message = hold_message(held, transactions, now_ms=now_ms)
            self.transaction_wait.update({"held": message, "seconds": round(time.monotonic() - started, 3)})
            if time.monotonic() >= limit:
                due = abort_due_ms(held, transactions)
                after = f"; its coordinator aborts it in {max(0, due - now_ms) / 1000:.0f} s at the latest" \
                    if due else ""
                raise BackfillFailed(
                    f"waited {time.monotonic() - started:.0f} s for open transactions, nothing was read: "
                    f"{message}{after}", result=self._result({"kind": self.request.sink}, []))
            self.on_wait(f"waiting for an open transaction to end: {message}")
            # In the backfill's driver process, not a worker (BACKFILL_DRIVER=worker is the tests' in-process mode).
            time.sleep(min(pause, max(0.0, limit - time.monotonic())))
            pause = min(pause * 2, 2.0)

    def _stable_offsets(self, ranges: list[BackfillRange]) -> dict[tuple[str, int], int]:
        stable: dict[tuple[str, int], int] = {}
        for topic in sorted({r.topic for r in ranges}):
            partitions = [r.partition for r in ranges if r.topic == topic]
            for partition, offset in self.adapter.last_stable_offsets(topic=topic, partitions=partitions).items():
                stable[(topic, partition)] = offset
        return stable

    def _open_transactions(self, held: list[HeldRange]) -> list[OpenTransaction]:
        """What the broker says about the transactions holding ``held``
        (Kafka's Java Admin); none where it cannot say (no JVM here, a broker
        without DescribeProducers, no Describe ACL): the words then name the
        partition and offset only."""
        reads = TransactionReads(self.request.cluster, timeout=settings.KAFKA_TIMEOUT_SECONDS)
        try:
            return reads.open_transactions(sorted({(h.range.topic, h.range.partition) for h in held}))
        except KafkaUnavailable as error:
            log.warning("backfill %s: could not describe the open transactions: %s", self.request.run_id, error)
            return []
        finally:
            reads.close()

    def _sink(self, prepared: list[PreparedRange]) -> SinkSpec:
        """The spec's sink: replay topics made ready (kafka), the handler, or
        the Parquet output folder (made if local)."""
        if self.request.sink == KAFKA:
            return self.checks.prepare_replay(prepared)
        if self.request.sink == HANDLER:
            return SinkSpec(HANDLER, handler=self.request.handler)
        output = self.request.output or str(settings.BACKFILL_OUTPUT)
        if "://" not in output:
            output = str(Path(output).absolute())
            Path(output).mkdir(parents=True, exist_ok=True)
        return SinkSpec(PARQUET, output=output)

    def _attempts(self, readable: list[PreparedRange], sink: SinkSpec, compacted: dict[str, bool]) -> dict:
        """Attempts until one ends; one killed by a signal is run again, MAX_ATTEMPTS in all."""
        while True:
            try:
                return self._attempt(readable, sink, compacted)
            except _AttemptKilled as killed:
                if len(self.attempts) >= MAX_ATTEMPTS:
                    raise BackfillFailed(
                        f"the job process was killed ({killed.signal_name}) in {len(self.attempts)} attempts",
                        error=killed.record.get("log_tail", ""), result=self._result(sink.describe(), []),
                    ) from None
                log.warning("backfill %s: job process killed by %s; running it again",
                            self.request.run_id, killed.signal_name)

    def _result(self, sink: dict, report: list[dict], timings: dict | None = None) -> dict:
        result = {
            "sink": sink,
            "isolation": self.request.isolation,
            # Records a reader of that isolation reads (counted when verified), and the planned offsets.
            "expected": sum(p["expected"] for p in report) if report else self.request.total,
            "offsets": self.request.total,
            "delivered": sum(p["delivered"] for p in report),
            "partitions": report,
            "attempts": self.attempts,
            "seconds": round(time.time() - self.started, 3),
        }
        if timings:
            result["timings"] = timings
        if self.transaction_wait:
            result["transaction_wait"] = dict(self.transaction_wait)
        return result

    def _attempt(self, readable: list[PreparedRange], sink: SinkSpec, compacted: dict[str, bool]) -> dict:
        """One run of the Spark job; its side of the protocol is ``adapters.spark.handshake``.

        1. Start it (``_start``): spec and log in a fresh work folder; on the
           Spark Connect server or in a process of its own (``launch``).
        2. Watch it until it exits or the time is up (``_watch``): pass
           progress on; explain a staged output and send the decision.
        3. Collect what it left (``_collect``): its result file and its log's tail.
        4. Judge how it ended (``_judge``): the report, ``_AttemptKilled``
           (run it again), or BackfillFailed with Spark's error text.
        """
        attempt = self._start(readable, sink)
        try:
            self._watch(attempt, readable, compacted)
            returncode = attempt.job.wait()
        finally:
            attempt.job.stop()
        outcome, log_tail = self._collect(attempt, returncode)
        return self._judge(attempt, returncode, outcome, log_tail, readable, sink, compacted)

    def _start(self, readable: list[PreparedRange], sink: SinkSpec) -> _Attempt:
        attempt_id = uuid.uuid4().hex[:12]
        folder = Path(tempfile.mkdtemp(prefix=work_prefix(self.request.run_id)))
        spec = self._spec(attempt_id, readable, sink, folder)
        (folder / "spec.json").write_text(json.dumps(spec.to_json(), indent=1))
        # ``runner_pid``: the process following the attempt (a driver, or a worker: BACKFILL_DRIVER).
        record = {"attempt": attempt_id, "started_at": timezone.now().isoformat(), "pid": None, "outcome": "running",
                  "runner_pid": os.getpid()}
        self.attempts.append(record)
        spawned = time.time()
        with open(folder / "job.log", "wb") as log_file:
            job = launch(spec, spec_path=folder / "spec.json", log_file=log_file, record=record,
                         connect_url=self.request.spark_connect, connect_token=self.request.spark_connect_token,
                         secrets=self.secrets)
        record["pid"] = job.pid
        record["mode"] = job.mode
        self.on_attempt(self.attempts)
        return _Attempt(folder=folder, record=record, job=job, spawned=spawned)

    def _spec(self, attempt: str, readable: list[PreparedRange], sink: SinkSpec, folder: Path) -> JobSpec:
        config = self.request.cluster
        return JobSpec(
            job_id=self.request.run_id, attempt=attempt,
            kafka=KafkaSettings.of(config),
            ranges=tuple(BackfillRange(p.range.topic, p.range.partition, p.read_start, p.range.end)
                         for p in readable),
            isolation=self.request.isolation, sink=sink, master=self.request.master, jars_dir=str(settings.SPARK_KAFKA_JARS_DIR),
            records_per_task=RECORDS_PER_TASK, tasks_per_core=TASKS_PER_CORE,
            kafka_timeout_ms=settings.BACKFILL_KAFKA_TIMEOUT_SECONDS * 1000,
            progress_file=str(folder / PROGRESS_FILE), result_file=str(folder / RESULT_FILE),
        )

    def _watch(self, attempt: _Attempt, readable: list[PreparedRange], compacted: dict[str, bool]) -> None:
        last_progress = None
        while attempt.job.poll() is None:
            if time.monotonic() > self.deadline:
                attempt.timed_out = True
                attempt.job.stop()
                return
            progress = read_json(attempt.folder / PROGRESS_FILE) or {}
            if progress and (progress.get("phase"), progress.get("done"), progress.get("total")) != last_progress:
                last_progress = (progress.get("phase"), progress.get("done"), progress.get("total"))
                self.on_progress(int(progress.get("done") or 0), int(progress.get("total") or 0))
                self._stage(progress)
            if progress.get("phase") == STAGED and not attempt.decided:
                attempt.job.send(self._explain_staged(attempt, readable, compacted))
                continue
            attempt.job.wait_for_change(PROGRESS_POLL_SECONDS)

    def _stage(self, progress: dict) -> None:
        self.on_stages(backfill_stages(phases=progress.get("phases") or {}, phase=str(progress.get("phase") or ""),
                                       done=int(progress.get("done") or 0), total=int(progress.get("total") or 0),
                                       at=float(progress.get("at") or time.time())))

    def _explain_staged(self, attempt: _Attempt, readable: list[PreparedRange], compacted: dict[str, bool]) -> str:
        """Protocol step 3: explain the staged counts against the cluster, and decide."""
        attempt.decided = True
        staged = read_json(attempt.folder / RESULT_FILE) or {}
        try:
            attempt.report = self.checks.report_from(staged, readable, compacted)
        except Exception as error:  # noqa: BLE001 - no explanation, no publication
            attempt.explain_error = error
            return DISCARD
        return decision_for(attempt.report)

    def _collect(self, attempt: _Attempt, returncode: int) -> tuple[dict, str]:
        """The attempt's result file and its log's tail; its work folder goes."""
        outcome = read_json(attempt.folder / RESULT_FILE) or {}
        last = read_json(attempt.folder / PROGRESS_FILE) or {}
        if last.get("phase") == "done":
            self._stage(last)
        log_tail = _tail(attempt.folder / "job.log")
        shutil.rmtree(attempt.folder, ignore_errors=True)
        attempt.record["ended_at"] = timezone.now().isoformat()
        attempt.record["returncode"] = returncode
        attempt.record["timings"] = _timings(outcome.get("timings") or {}, attempt.spawned)
        return outcome, log_tail

    def _judge(self, attempt: _Attempt, returncode: int, outcome: dict, log_tail: str,
               readable: list[PreparedRange], sink: SinkSpec, compacted: dict[str, bool]) -> dict:
        """How the attempt ended: timed out, killed (run it again), failed, or
        finished, with the report of a finished one."""
        secrets = (*self.request.cluster.secrets, *self.secrets.values)  # the key as stored and as the job got it
        if attempt.timed_out:
            self._ended(attempt, "timed out")
            raise BackfillFailed(
                f"the job process ran longer than {self.request.timeout_seconds}s and was killed; nothing published",
                error=secret_redact(log_tail, *secrets), result=self._result(sink.describe(), []))
        finished = outcome.get("status") in FINISHED
        lost = attempt.job.lost()
        if lost and not finished:
            attempt.record["log_tail"] = secret_redact(log_tail[-2000:], *secrets)
            self._ended(attempt, f"killed by {lost}")
            raise _AttemptKilled(lost, attempt.record)
        if returncode != 0 and finished:
            # Its result was complete (and any output published) before the process died on its way out.
            log.warning("backfill %s: job process exited with %s after finishing", self.request.run_id, returncode)
        elif returncode != 0 or not finished:
            self._ended(attempt, "failed")
            error = (outcome.get("error") or getattr(attempt.job, "error", "") or log_tail
                     or f"the job process exited with code {returncode}")
            raise BackfillFailed(f"the Spark job failed (exit code {returncode})",
                                 error=system_text(secret_redact(error, *secrets)),
                                 result=self._result(sink.describe(), []))
        self._ended(attempt, outcome["status"])
        if attempt.explain_error is not None:
            raise BackfillFailed(
                f"could not explain the missing offsets, so nothing was published: {attempt.explain_error}",
                result=self._result(sink.describe(), []))
        report = attempt.report
        if report is None:  # kafka and handler sinks delivered as they went
            report = self.checks.report_from(outcome, readable, compacted)
        # A discarded output comes with problems in the report: run() fails the job with them.
        return {"report": self.checks.with_unread(report, readable), "sink": outcome.get("sink") or sink.describe(),
                "timings": attempt.record["timings"], "verified_by": outcome.get("verified_by", "")}

    def _ended(self, attempt: _Attempt, outcome: str) -> None:
        attempt.record["outcome"] = outcome
        self.on_attempt(self.attempts)


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
