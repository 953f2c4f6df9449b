"""How the executor starts one attempt of a Spark backfill job: on a
session of a Spark Connect server (``ConnectJob``, ``adapters.spark.connect``)
or in a Spark process of its own (``JobProcess``). Both look the same to
``tasks.backfill.runner``: poll for an exit code, send the publish/discard
decision (step 4 of ``adapters.spark.handshake``), stop, and say why an
attempt ended without an exit code it can trust.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from adapters.spark.connect import ConnectUnavailable, connect_session, job_tag, server_address
from adapters.spark.handshake import DISCARD, Decision
from adapters.spark.spec import SECRETS_ENV, JobSpec, KafkaSecrets

log = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 30.0
BASE_DIR = Path(__file__).resolve().parents[2]


def launch(spec: JobSpec, *, spec_path: Path, log_file, record: dict, connect_url: str, connect_token: str,
           secrets: KafkaSecrets) -> JobProcess | ConnectJob:
    """Start an attempt on the Spark Connect server at ``connect_url`` when
    one is configured and answers, in a process of its own otherwise (the
    server is a speed-up, never a dependency). ``record``, the attempt's
    entry in the job's result, gets the session or why there was none."""
    if connect_url:
        try:
            job = ConnectJob(url=connect_url, token=connect_token, spec=spec, secrets=secrets, log_file=log_file)
            record.update(server=job.server, session_id=job.session_id, tag=job.tag)
            return job
        except ConnectUnavailable as error:
            log.warning("backfill %s: %s; running the job in its own process", spec.job_id, error)
            record["connect_unavailable"] = str(error)
    return JobProcess(spec_path=spec_path, cwd=BASE_DIR, environment=_process_environment(secrets),
                      log_file=log_file)


def _process_environment(secrets: KafkaSecrets) -> dict:
    """A job process imports this project, and gets the secrets in its environment only."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(BASE_DIR), os.environ.get("PYTHONPATH")) if p)}
    environment.pop(SECRETS_ENV, None)
    environment.update(secrets.to_environment())
    return environment


class JobProcess:
    """``python -m adapters.spark.backfill_job --spec S --parent-pipe`` in a new
    session (a time-out kills its JVM too), stdin a pipe for the decision
    (``handshake.ParentPipe`` reads it)."""

    mode = "process"

    def __init__(self, *, spec_path: Path, cwd: Path, environment: dict, log_file) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adapters.spark.backfill_job", "--spec", str(spec_path), "--parent-pipe"],
            cwd=cwd, env=environment, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()

    def wait_for_change(self, seconds: float) -> None:
        """Until the process exits, at most ``seconds``."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def send(self, decision: str) -> None:
        try:
            self.process.stdin.write(f"{decision}\n".encode())
            self.process.stdin.flush()
        except OSError:
            pass  # it died meanwhile; its exit status says how

    def wait(self) -> int:
        return self.process.wait()

    def stop(self) -> None:
        """SIGKILL the job's process group (its Python and its JVM)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def lost(self) -> str | None:
        code = self.process.returncode
        return signal.Signals(-code).name if code is not None and code < 0 else None


class ConnectJob:
    """One attempt on a Spark Connect server: ``backfill_job.run`` in a
    thread of this process, on a new session of the server, every operation
    tagged ``job_tag(job, attempt)``.

    The server does not cancel a query whose client died, so:
    - ``stop()`` (time-out, or the runner is done) interrupts the tag and
      discards staged output;
    - a watchdog process (``adapters.spark.watchdog``), in a session of its own
      so it outlives this worker, interrupts the tag if this process dies
      before telling it ``done``;
    - Parquet output is published by this process only, after the runner's
      decision: a dead client never publishes.
    A server that goes away mid-job fails its queries with UNAVAILABLE: the
    attempt is ``lost()`` and the runner runs it again (in a process of its
    own if no server answers then).
    """

    mode = "connect"

    def __init__(self, *, url: str, token: str, spec, secrets: KafkaSecrets, log_file) -> None:
        from adapters.spark import backfill_job

        self.url = url
        self.token = token
        self.pid = None
        self.returncode: int | None = None
        self._lost: str | None = None
        self.tag = job_tag(spec.job_id, spec.attempt)
        # Set when the job waits for its decision and when it ends: the runner wakes at once.
        self._changed = threading.Event()
        self._decision = Decision(asked=self._changed)
        self._stopped = False
        started = time.time()
        self.session = connect_session(url, token=token)  # ConnectUnavailable: ``launch`` falls back
        self.session_id = self.session.session_id
        self.server = server_address(url)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-m", "adapters.spark.watchdog", "--url", url, "--session-id", self.session_id,
             "--tag", self.tag],
            cwd=BASE_DIR, env={**os.environ, "SPARK_CONNECT_TOKEN": token},
            stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )

        def target() -> None:
            code = 1
            try:
                code = backfill_job.run(spec, parent_pipe=self._decision, started=started, spark=self.session,
                                        secrets=secrets)
            finally:
                if code != 0 and not self._server_answers():
                    self._lost = f"the Spark Connect server at {self.server} going away (stopped or crashed)"
                    code = -1
                self.returncode = code
                self._changed.set()

        self._thread = threading.Thread(target=target, name=f"backfill-connect-{spec.job_id}", daemon=True)
        self._thread.start()

    def _server_answers(self) -> bool:
        try:
            connect_session(self.url, token=self.token).stop()
        except ConnectUnavailable:
            return False
        return True

    def poll(self) -> int | None:
        return self.returncode

    def wait_for_change(self, seconds: float) -> None:
        """Until the job asks for its decision or ends, at most ``seconds``."""
        if self._changed.wait(seconds):
            self._changed.clear()

    def send(self, decision: str) -> None:
        self._decision.decide(decision)

    def wait(self) -> int:
        """The exit code; after ``stop()``, -1 if the attempt is still inside
        Spark (its watchdog goes on interrupting it) rather than waiting on."""
        self._thread.join(STOP_WAIT_SECONDS if self._stopped else None)
        return self.returncode if self.returncode is not None else -1

    def stop(self) -> None:
        """Interrupt whatever still runs (nothing published), end the
        session, and release the watchdog."""
        if self._stopped:
            return
        self._stopped = True
        self._decision.decide(DISCARD)
        if self._thread.is_alive():
            try:
                self.session.interruptTag(self.tag)
            except Exception as error:  # noqa: BLE001 - the watchdog is still there
                log.warning("could not interrupt %s: %s", self.tag, error)
            self._thread.join(timeout=STOP_WAIT_SECONDS)
        if self._thread.is_alive():
            # Still inside Spark: closing the pipe makes the watchdog interrupt it again.
            self._watchdog.stdin.close()
            return
        try:
            self._watchdog.stdin.write(b"done\n")
            self._watchdog.stdin.close()
        except OSError:
            pass
        self._watchdog.wait(timeout=10)
        try:
            self.session.stop()
        except Exception:  # noqa: BLE001 - the server may be gone
            pass

    def lost(self) -> str | None:
        return self._lost
