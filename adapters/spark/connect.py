"""Spark Connect: Spark's own long-lived, multi-client server runs backfills
for the Celery workers, so that a job skips the JVM start and the JIT
warm-up of a fresh process. No Django here.

Server (what ``scripts/app.sh``, the tests and the bench start)::

    python -m adapters.spark.connect [--host 127.0.0.1] [--port 15002] [--master local[*]]
                                  [--jars-dir DIR] [--driver-memory 1g]

replaces itself (exec) with ``spark-submit --class SparkConnectServer`` on
``--master`` (``local[*]``, ``spark://…``, ``yarn``, ``k8s://…``) with the
local Kafka connector jars (executors fetch them from the driver), the
settings of ``SERVER_CONF``, and the token of ``SPARK_CONNECT_TOKEN``, which
reaches Spark through its environment (``TOKEN_ENV``), never its command line.

Client: ``connect_session`` opens a new session (one per job attempt: a
shared session stopped by one thread breaks the others); ``job_tag`` names
an attempt's operations so they can be interrupted, also from another
process that knows the session id (``interrupt``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

from adapters.spark.reader import REDACTION_REGEX, STRING_REDACTION_REGEX

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# The variable both sides of Spark read the token from (server: its
# spark.connect.authenticate.token; pyspark's client: the default token).
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
DEFAULT_PORT = 15002
DEFAULT_DRIVER_MEMORY = "1g"
_MEMORY = re.compile(r"^[1-9]\d*[kmgt]$", re.IGNORECASE)

# The server's JVM gives memory back when it idles (issue 35: with the
# throughput collector it kept 1.1 GiB of a 365 MiB start after a job, for
# good). When no collection ran for the interval, G1 runs a full one, which
# compacts what the job left and uncommits the heap beyond MaxHeapFreeRatio
# (a concurrent cycle instead left 200 MiB of dead old regions committed
# around 66 MiB live); the C heap (malloc arenas that the Kafka client,
# Parquet's codecs and Netty grew) is trimmed on an interval too. G1 reads
# ~10% slower than the throughput collector here (0.96-1.12 s against
# 0.84-0.94 s per warm 1M read, bench/RESULTS.md).
IDLE_GC_MILLISECONDS = 15_000
SERVER_JVM_OPTIONS = (
    "-XX:+UseG1GC",
    f"-XX:G1PeriodicGCInterval={IDLE_GC_MILLISECONDS}",
    "-XX:-G1PeriodicGCInvokesConcurrent",
    "-XX:MinHeapFreeRatio=10",
    "-XX:MaxHeapFreeRatio=30",
    # Spark's ContextCleaner asks for System.gc(): a concurrent cycle then, not a full pause.
    "-XX:+ExplicitGCInvokesConcurrent",
    f"-XX:TrimNativeHeapInterval={IDLE_GC_MILLISECONDS}",
)

# The same on a cluster's executors, whose Java this project did not choose: a
# JVM too old for an option ignores it rather than failing to start
# (TrimNativeHeapInterval came with 17.0.9).
EXECUTOR_JVM_OPTIONS = ("-XX:+IgnoreUnrecognizedVMOptions", *SERVER_JVM_OPTIONS)

# Settings that can only be given when the server starts.
SERVER_CONF = {
    "spark.driver.extraJavaOptions": " ".join(SERVER_JVM_OPTIONS),
    # Every query has a group id of its own, so cached Kafka consumers (and
    # their fetched buffers) are never reused across jobs: evict them soon.
    # Without these a long-lived server's heap filled after ~20 reads.
    "spark.kafka.consumer.cache.capacity": "16",
    "spark.kafka.consumer.cache.timeout": "30s",
    "spark.kafka.consumer.cache.evictorThreadRunInterval": "10s",
    "spark.kafka.consumer.fetchedData.cache.timeout": "30s",
    "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "10s",
    # The replay's producer (with its 32 MiB buffer pool) is cached 10 minutes by default.
    "spark.kafka.producer.cache.timeout": "30s",
    "spark.kafka.producer.cache.evictorThreadRunInterval": "10s",
    # A query whose client went away (no reattach) is interrupted after this,
    # a second line of defence behind the executor's watchdog (default 5 min).
    "spark.connect.execute.manager.detachedTimeout": "30s",
    "spark.connect.execute.manager.maintenanceInterval": "5s",
    # How often a running query reports its stages to the client (job progress); default 2 s.
    "spark.connect.progress.reportInterval": "500ms",
    # A Python worker (the handler sink) ends with its task rather than idling
    # for Spark's minute with the handler's imports in memory (a fork per
    # task of 200,000 records costs little).
    "spark.python.worker.reuse": "false",
    # Nor does a daemon to fork them from: a Connect server started one per
    # session that ran the handler sink (each session has Python paths of
    # its own) and kept it for good, 47 MiB a job (issue 35: four handler
    # jobs, four daemons). Each task's worker starts and ends by itself.
    "spark.python.use.daemon": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Options holding secrets (JAAS, the client key and its password) redacted wherever Spark prints
    # options, and in the plans it prints as text (every backfill sets both on its session, too).
    "spark.redaction.regex": REDACTION_REGEX,
    "spark.sql.redaction.string.regex": STRING_REDACTION_REGEX,
}


# The server's logging: Spark's defaults (INFO to stderr), except the logger
# that prints, at INFO, each operation of a closing session with its whole
# plan, options included and unredacted (SparkConnectExecutionManager's
# "Execution ExecuteInfo(...) removed in removeSessionExecutions"): a
# backfill's JAAS config and client key would stand in the server's log.
LOG_CONFIG = """\
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.executions.name = org.apache.spark.sql.connect.service.SparkConnectExecutionManager
logger.executions.level = warn
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = error
"""


class ConnectUnavailable(Exception):
    """No Spark Connect server answers (or it refuses the token)."""


def job_tag(job_id: str, attempt: str) -> str:
    """The tag of every Spark operation of one attempt."""
    return f"gapwatch-backfill-{job_id}-{attempt}"


def server_address(url: str) -> str:
    """``host:port`` of an ``sc://`` URL, for messages (never the token)."""
    parsed = urlparse(url)
    return f"{parsed.hostname}:{parsed.port or DEFAULT_PORT}"


def client_url(url: str, *, token: str, session_id: str = "") -> str:
    """The connection string for pyspark: ``url`` plus the token and, to
    reach an existing session, its id. A token on a host other than
    ``localhost`` makes pyspark use TLS (a TLS proxy in front of the server);
    on ``localhost`` gRPC's local credentials carry it."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ValueError(f"a Spark Connect URL looks like sc://host:port, got {url!r}")
    host = parsed.hostname
    if host in ("127.0.0.1", "::1") and token:
        host = "localhost"
    params = [p for p in parsed.path.lstrip("/").split(";") if p and not p.startswith(("token=", "session_id="))]
    if token:
        params.append(f"token={token}")
    if session_id:
        params.append(f"session_id={session_id}")
    return f"sc://{host}:{parsed.port or DEFAULT_PORT}/" + "".join(f";{p}" for p in params)


def connect_session(url: str, *, token: str, session_id: str = "", connect_seconds: float = 2.0,
                    retry_seconds: float = 5.0):
    """A new session on the server (or the session ``session_id``), checked
    with a request that needs no task slot (the server's version: a runaway
    query holding every slot must not keep out the call that interrupts it),
    giving up after about ``connect_seconds`` of retries. Later calls retry for about ``retry_seconds`` (pyspark's default
    policy retries for ~10 minutes), so a server that died is noticed in
    seconds. (gRPC's own reconnect back-off comes on top: a dead server is
    given up on after ~3 s here with 2 s, ~11 s with 5 s.)"""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    # The Connect builder itself: pyspark's generic builder.remote() marks the
    # whole process (and its children, through SPARK_CONNECT_MODE_ENABLED) as
    # Connect-only, and a job process started from it could not start Spark.
    builder = ConnectSession.builder.remote(client_url(url, token=token, session_id=session_id))
    try:
        # create(), also for an existing session id: getOrCreate() would hand
        # back whatever session this process made last, whatever the id.
        session = builder.create()
        session.client.set_retry_policies([_policy(DefaultPolicy, connect_seconds)])
        session.version  # noqa: B018 - the round trip is the check
    except Exception as error:  # noqa: BLE001 - any failure to reach it means: not available
        raise ConnectUnavailable(f"no Spark Connect server at {server_address(url)}: {first_line(error)}") from None
    session.client.set_retry_policies([_policy(DefaultPolicy, retry_seconds)])
    return session


def _policy(default_policy, total_seconds: float):
    """pyspark's default retry policy (it retries UNAVAILABLE and the like)
    cut to about ``total_seconds`` in all."""
    backoff, retries, waited = 0.2, 0, 0.0
    while waited + backoff <= total_seconds:
        waited += backoff
        backoff = min(backoff * 2, 2.0)
        retries += 1
    return default_policy(max_retries=retries, initial_backoff=200, max_backoff=2000, backoff_multiplier=2,
                          jitter=0, min_jitter_threshold=0)


def interrupt(url: str, *, token: str, session_id: str, tag: str) -> list[str]:
    """Interrupt the operations tagged ``tag`` of session ``session_id``
    (from any process); returns the ids of the operations interrupted."""
    session = connect_session(url, token=token, session_id=session_id)
    return list(session.interruptTag(tag))


def first_line(error: BaseException) -> str:
    """What the server or gRPC said (``details`` of a gRPC error), else the first line."""
    text = str(error).strip() or type(error).__name__
    details = re.search(r'details = "([^"]*)"', text)
    return (details.group(1) if details else text.splitlines()[0])[:300]


# -- the server ----------------------------------------------------------------------------------


PYTHON_WORKER_MODULE = "adapters.spark.python_worker"


def local_cores(master: str) -> int:
    """The task slots of ``local``, ``local[N]``, ``local[*]`` (this machine's
    cores) and their ``[N,F]`` forms."""
    from adapters.spark.session import LOCAL_MASTER

    found = LOCAL_MASTER.fullmatch(master)
    if not found:
        raise ValueError(f"not a local master: {master!r}")
    if found.group(1) is None:
        return 1
    return os.cpu_count() or 1 if found.group(1) == "*" else int(found.group(1))


def server_command(*, master: str, host: str, port: int, jars: list[str], driver_memory: str,
                   spark_home: str, log_config: Path | None = None) -> list[str]:
    """``spark-submit`` of the Connect server with our settings. A local
    master binds the driver to loopback and sets its parallelism (a client
    cannot ask a Connect session for it). ``log_config``: the file
    ``LOG_CONFIG`` was written to, for the driver's log4j."""
    from adapters.spark.session import V1_SOURCES, with_task_retries

    conf = {
        **SERVER_CONF,
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        # Batch reads of "kafka" through the DataSource V2 reader, as in a job's own session.
        "spark.sql.sources.useV1SourceList": V1_SOURCES,
    }
    if log_config is not None:
        conf["spark.driver.extraJavaOptions"] += f" -Dlog4j2.configurationFile={log_config}"
    if master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.default.parallelism"] = str(local_cores(master))
        # Its Python workers run here, with this project on their path (main): ours connects back before
        # importing pyspark, inside Spark's fixed 10 s (adapters/spark/python_worker.py).
        conf["spark.python.worker.module"] = PYTHON_WORKER_MODULE
    else:
        # A cluster's executors live as long as the server: they give memory back
        # as its driver does (issue 35: a standalone cluster's two executors kept
        # 2.3 GiB after a job). Spark puts these before the cluster's own
        # spark.executor.extraJavaOptions, so an operator's options still win.
        conf["spark.executor.defaultJavaOptions"] = " ".join(EXECUTOR_JVM_OPTIONS)
    command = [str(Path(spark_home) / "bin" / "spark-submit"), "--class", SERVER_CLASS,
               "--master", with_task_retries(master),
               "--name", "gapwatch-spark-connect", "--driver-memory", driver_memory, "--jars", ",".join(jars)]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def main(argv: list[str] | None = None) -> int:
    from adapters.spark.session import SparkJarsMissing, connector_jars, spark_dir

    parser = argparse.ArgumentParser(prog="python -m adapters.spark.connect", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address the server listens on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER") or "local[*]")
    parser.add_argument("--jars-dir", default=os.environ.get("SPARK_KAFKA_JARS_DIR", ""))
    parser.add_argument("--driver-memory", default=os.environ.get("SPARK_CONNECT_MEMORY") or DEFAULT_DRIVER_MEMORY)
    args = parser.parse_args(argv)
    if not _MEMORY.match(args.driver_memory):
        parser.error(f"--driver-memory (or SPARK_CONNECT_MEMORY) must look like 1g or 768m, got {args.driver_memory!r}")
    token = os.environ.get("SPARK_CONNECT_TOKEN", "")
    if not token:
        parser.error("SPARK_CONNECT_TOKEN must be set: the server refuses clients without it")
    try:
        jars = connector_jars(Path(args.jars_dir))
    except SparkJarsMissing as error:
        parser.error(str(error))
    import pyspark

    spark_home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    project = str(Path(__file__).resolve().parents[2])
    environment = {**os.environ, "SPARK_HOME": spark_home, TOKEN_ENV: token,
                   # Python workers (the handler sink) run this interpreter and import the project.
                   "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
                   "PYTHONPATH": os.pathsep.join(p for p in (project, os.environ.get("PYTHONPATH")) if p)}
    environment.pop("SPARK_CONNECT_TOKEN", None)
    directory = spark_dir()
    directory.mkdir(parents=True, exist_ok=True)
    os.chdir(directory)  # Spark's run-time files (spark-warehouse/, ...) stay out of the repository
    log_config = directory / "connect-log4j2.properties"
    log_config.write_text(LOG_CONFIG)
    command = server_command(master=args.master, host=args.host, port=args.port, jars=jars,
                             driver_memory=args.driver_memory, spark_home=spark_home, log_config=log_config)
    sys.stdout.write(f"starting the Spark Connect server on {args.host}:{args.port} (master {args.master})\n")
    sys.stdout.flush()
    os.execvpe(command[0], command, environment)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
