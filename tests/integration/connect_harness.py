"""A Spark Connect server for tests: ``python -m tasks.spark.connect`` as
``scripts/app.sh`` starts it, on a free loopback port, with a token of its
own, in a session of its own (so stopping it also ends its JVM)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from tests.integration.kafka_harness import wait_until

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ConnectServer:
    def __init__(self, log_path: Path, *, master: str = "local[2]", driver_memory: str = "768m",
                 extra_env: dict | None = None) -> None:
        self.port = free_port()
        self.token = secrets.token_urlsafe(24)
        self.url = f"sc://localhost:{self.port}"
        self.log = log_path
        self.master = master
        environment = {**os.environ, "SPARK_CONNECT_TOKEN": self.token, **(extra_env or {})}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tasks.spark.connect", "--port", str(self.port), "--master", master,
             "--jars-dir", str(settings.SPARK_KAFKA_JARS_DIR), "--driver-memory", driver_memory],
            cwd=ROOT, env=environment, stdout=open(log_path, "ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.process.pid

        def ready() -> bool:
            assert self.process.poll() is None, f"the Connect server exited: {log_path.read_text()[-3000:]}"
            return "Spark Connect server started at" in log_path.read_text()

        wait_until(ready, timeout=120, interval=0.2, what="the Spark Connect server to start")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGKILL to the server's JVM (its whole session): a crash, as the OOM killer would."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
