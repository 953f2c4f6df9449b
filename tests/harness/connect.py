"""A Spark Connect server for tests and benches: ``python -m adapters.spark.connect``
as ``scripts/app.sh`` starts it, on a free loopback port, with a token of its
own, in a session of its own (so stopping it also ends its JVM)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from tests.harness.processes import _die_with_parent, free_ports
from tests.harness.kafka_clients import wait_until

ROOT = Path(__file__).resolve().parents[2]
READY_LINE = "Spark Connect server started at"


class ConnectServer:
    """Started by the constructor and ready once Spark logs READY_LINE (the
    pid is the server's JVM: the module execs spark-submit); ``startup`` is
    the seconds that took. It dies with the process that started it (start
    it from the main thread: see ``procs._die_with_parent``)."""

    def __init__(self, log_path: Path, *, master: str = "local[2]", driver_memory: str = "768m",
                 extra_env: dict | None = None, start_timeout: float = 120) -> None:
        self.port = free_ports(1)[0]
        self.token = secrets.token_urlsafe(24)
        self.url = f"sc://localhost:{self.port}"
        self.log = log_path
        self.master = master
        environment = {**os.environ, "SPARK_CONNECT_TOKEN": self.token, **(extra_env or {})}
        spawned = time.monotonic()
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "adapters.spark.connect", "--port", str(self.port), "--master", master,
                 "--jars-dir", str(settings.SPARK_KAFKA_JARS_DIR), "--driver-memory", driver_memory],
                cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )
        self.pid = self.process.pid

        def ready() -> bool:
            assert self.process.poll() is None, f"the Connect server exited: {self.log_text()[-3000:]}"
            return READY_LINE in self.log_text()

        try:
            wait_until(ready, timeout=start_timeout, interval=0.2, what="the Spark Connect server to start")
        except BaseException:
            self.stop()  # a server that never got ready is no one's to stop later
            raise
        self.startup = time.monotonic() - spawned

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGKILL to the server's JVM (its whole session): a crash, as the OOM killer would."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)

    def shut_down(self, grace: float = 10.0) -> None:
        """SIGTERM to the server's session (a driver then leaves its cluster
        cleanly), SIGKILL after ``grace`` seconds."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.stop()

    def warm_up(self, output: Path, *, records: int | None = None, timeout: float = 300) -> str:
        """``manage.py warm_spark_connect --no-kafka`` against this server, as
        ``scripts/app.sh`` runs it beside the server it starts, staging under
        ``output``; its line (it raised if the command failed). Its made-up
        job only: the command would look for a cluster in the project's own
        database, not a test's (``adapters.spark.warm_up.warm_up_kafka`` reads
        a broker of the caller's)."""
        command = [sys.executable, "manage.py", "warm_spark_connect", "--wait", "30", "--no-kafka"]
        if records is not None:
            command += ["--records", str(records)]
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "SPARK_CONNECT_URL": self.url, "SPARK_CONNECT_TOKEN": self.token,
                 "BACKFILL_OUTPUT": str(output), "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
        )
        assert done.returncode == 0, f"the warm-up failed: {done.stdout[-1500:]}{done.stderr[-3000:]}"
        return done.stdout.strip()
