"""How the executor starts one attempt of a Spark backfill job: in a process
of its own (``JobProcess``) or on the long-lived Spark host
(``HostedJob``, ``tasks.spark.host``). Both look the same to
``tasks.backfill.runner``: poll for an exit code, send the publish/discard decision,
stop, and say why an attempt ended without an exit code it can trust.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

CONNECT_SECONDS = 10.0


class HostUnavailable(Exception):
    """No Spark host answers on the socket; run the job in its own process."""


class JobProcess:
    """``python -m tasks.spark.backfill_job --spec S --parent-pipe`` in a new
    session (a time-out kills its JVM too), stdin a pipe for the decision."""

    mode = "process"

    def __init__(self, *, spec_path: Path, cwd: Path, environment: dict, log_file) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tasks.spark.backfill_job", "--spec", str(spec_path), "--parent-pipe"],
            cwd=cwd, env=environment, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()

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


class HostedJob:
    """One attempt on the Spark host, over its Unix socket (protocol in
    ``tasks.spark.host``). Closing the connection makes the host cancel the
    attempt; a host that dies closes it from its side: ``lost()``."""

    mode = "host"

    def __init__(self, *, socket_path: str, spec_path: Path, password: str) -> None:
        self.returncode: int | None = None
        self._lost: str | None = None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(CONNECT_SECONDS)
        try:
            self._sock.connect(socket_path)
            self._sock.sendall((json.dumps({"spec": str(spec_path), "password": password}) + "\n").encode())
            self._reader = self._sock.makefile("rb")
            first = self._reader.readline()
        except OSError as error:
            self._sock.close()
            raise HostUnavailable(f"no Spark host on {socket_path}: {error}") from None
        self._sock.settimeout(None)
        try:
            answer = json.loads(first)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            self._sock.close()
            raise HostUnavailable(f"the Spark host on {socket_path} closed the connection before accepting the job")
        self.pid = answer.get("pid")
        self.error = answer.get("error", "")
        if "exit" in answer:
            self.returncode = int(answer["exit"])
            self._sock.close()
            return
        self._thread = threading.Thread(target=self._read, name="backfill-host-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for raw in self._reader:
                try:
                    answer = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(answer, dict) and "exit" in answer:
                    self.returncode = int(answer["exit"])
                    return
        except OSError:
            pass
        finally:
            if self.returncode is None:
                self._lost = "the Spark host closing the connection (host stopped or crashed)"
                self.returncode = -1

    def poll(self) -> int | None:
        return self.returncode

    def send(self, decision: str) -> None:
        try:
            self._sock.sendall(f"{decision}\n".encode())
        except OSError:
            pass  # the host went away; the reader sees it

    def wait(self) -> int:
        if self.returncode is None:
            self._thread.join()
        return self.returncode

    def stop(self) -> None:
        """Hang up: a job still running is cancelled by the host, nothing published."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self.returncode is None:
            self._thread.join(timeout=5)

    def lost(self) -> str | None:
        return self._lost
