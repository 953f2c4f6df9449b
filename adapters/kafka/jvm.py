"""One JVM per Python process that runs Kafka's own Java client, driven
through py4j (the bridge PySpark ships and uses for its own JVM).

The JVM starts on first use (``java_gateway()``), never on import, with a
small heap and the client-only JIT tier (a short-lived admin client gains
nothing from C2). It dies with this process: py4j's ``--die-on-broken-pipe``
ends it when our end of its stdin closes, however this process ends. A
process forked after the start (a Celery prefork child) starts its own, so
no two processes share one socket.

The gateway listens on loopback and answers only callers with its token
(``enable_auth``; the JVM makes the token and hands it over on its stdout),
because whoever drives it can read the secrets the clients in it were given.
Secrets are passed through gateway calls, never as JVM arguments, so they
never appear on a command line.
"""

from __future__ import annotations

import glob
import os
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from py4j.java_gateway import GatewayParameters, JavaGateway, find_jar_path, launch_gateway

# -Xshare:auto uses the JDK's class-data archive when there is one (and ours,
# class_archive_options). The JVM's own warnings go to stderr: its stdout carries
# the port and token py4j reads first.
WARNINGS_TO_STDERR = ("-Xlog:disable", "-Xlog:all=warning:stderr")
JVM_OPTIONS = ("-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", *WARNINGS_TO_STDERR)
# The JVM's last lines on stderr, kept to say why it did not start.
_STDERR_LINES = 20

_lock = threading.Lock()
_gateway: JavaGateway | None = None
_owner_pid = 0
# Seconds the last start took, launch to a first answered call (the bench reports it).
last_start_seconds: float | None = None


class JvmUnavailable(Exception):
    """The JVM could not be started or stopped answering."""


def kafka_jars_dir() -> Path:
    """The broker's jars (Kafka's client and its dependencies):
    ``$GAPWATCH_HOME/lib/kafka``, ``.gapwatch/lib/kafka`` in the repository by default."""
    home = os.environ.get("GAPWATCH_HOME") or str(Path(__file__).resolve().parents[2] / ".gapwatch")
    return Path(home) / "lib" / "kafka"


def java_helpers_dir() -> Path:
    """Gapwatch's own Java classes (adapters/kafka/java), compiled by setup.sh beside the jars."""
    return kafka_jars_dir().parent / "gapwatch-java"


def java_helpers_jar() -> Path:
    """The same classes in one jar, which setup.sh makes beside them: the class
    path holds the jar, since a class path with a non-empty folder on it
    cannot use a class archive."""
    return java_helpers_dir().with_suffix(".jar")


def class_archive() -> Path:
    """The class-data-sharing archive setup.sh writes (``adapters.kafka.class_archive``)."""
    return kafka_jars_dir().parent / "kafka-client.jsa"


def class_archive_options() -> tuple[str, ...]:
    """The JVM options that map ``class_archive()``, if setup wrote it."""
    archive = class_archive()
    return (f"-XX:SharedArchiveFile={archive}",) if archive.is_file() else ()


def _py4j_jar() -> str:
    """py4j's own jar: installed beside the package, or the copy in PySpark's jars."""
    found = find_jar_path()
    if found and os.path.exists(found):
        return found
    import pyspark

    copies = sorted(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "py4j-*.jar")))
    if not copies:
        raise JvmUnavailable("py4j's jar was not found (neither beside py4j nor in PySpark's jars)")
    return copies[-1]


def java_gateway() -> JavaGateway:
    """This process's gateway, started on the first call."""
    global _gateway, _owner_pid
    with _lock:
        if _gateway is not None and _owner_pid == os.getpid():
            return _gateway
        # A gateway inherited through fork belongs to the parent: leave it alone.
        _gateway, _owner_pid = start_gateway(extra_options=class_archive_options()), os.getpid()
        return _gateway


def start_gateway(*, extra_options: tuple[str, ...] = ()) -> JavaGateway:
    """A new JVM and its gateway, with ``extra_options`` after ``JVM_OPTIONS``;
    not this process's gateway (``java_gateway``): the caller stops it."""
    global last_start_seconds
    jars = kafka_jars_dir()
    if not (jars / f"kafka-clients-{_client_version(jars)}.jar").exists():
        raise JvmUnavailable(f"Kafka's client jars are missing in {jars} (run scripts/setup.sh)")
    helpers = java_helpers_jar() if java_helpers_jar().is_file() else java_helpers_dir()
    started = time.monotonic()
    stderr: deque[str] = deque(maxlen=_STDERR_LINES)
    try:
        port, token, process = launch_gateway(
            jarpath=_py4j_jar(), classpath=f"{jars}/*:{helpers}", javaopts=[*JVM_OPTIONS, *extra_options],
            die_on_exit=True,
            enable_auth=True, return_proc=True, redirect_stderr=stderr,
        )
    except (OSError, ValueError) as error:
        # ValueError: the JVM ended before printing its port.
        detail = " | ".join(line.strip() for line in stderr) or str(error)
        raise JvmUnavailable(f"the JVM for Kafka's Java client did not start: {detail}") from None
    gateway = JavaGateway(
        gateway_parameters=GatewayParameters(port=port, auth_token=token, auto_convert=True, eager_load=True),
        java_process=process,
    )
    last_start_seconds = time.monotonic() - started
    return gateway


def _client_version(jars: Path) -> str:
    names = sorted(path.name for path in jars.glob("kafka-clients-*.jar"))
    return names[-1].removeprefix("kafka-clients-").removesuffix(".jar") if names else "missing"


def gateway_discard(gateway: JavaGateway) -> None:
    """Forget a gateway that stopped answering, so that the next call starts a new JVM."""
    global _gateway
    with _lock:
        if _gateway is gateway:
            _gateway = None
    stop_gateway(gateway)


def gateway_shutdown() -> None:
    """Stop this process's JVM, if it runs (tests and benches; a worker's ends with it)."""
    global _gateway
    with _lock:
        gateway, _gateway = (_gateway, None) if _owner_pid == os.getpid() else (None, None)
    if gateway is not None:
        stop_gateway(gateway)


def stop_gateway(gateway: JavaGateway, *, exit_timeout: float = 0) -> None:
    """Shut ``gateway`` down and close its JVM's stdin, which ends the JVM
    (``--die-on-broken-pipe``); a JVM still running ``exit_timeout`` seconds
    later (one writing a class archive as it exits takes about one) is killed."""
    process = gateway.java_process
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - a JVM that is already gone
        pass
    if process is None:
        return
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=exit_timeout)
    except (OSError, subprocess.TimeoutExpired):
        pass
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)
