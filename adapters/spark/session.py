"""Builds Spark sessions that read Kafka with local connector jars only.

The jars come from the setup step (Maven); ``spark.jars.packages`` is never
used, because it resolves over the network at run time.

Spark writes run-time files under the JVM's working directory whatever the
configuration says (``spark-warehouse/``, ``derby.log``; up to 4.0 also its
session ``artifacts/``, SPARK-52396, fixed in 4.2 by using the temp dir). So
the JVM starts in ``$GAPWATCH_HOME/spark`` (``spark_dir``), never in the
repository.
"""

from __future__ import annotations

import logging
import re
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

# py4j logs at INFO from __del__ during interpreter shutdown, after handlers closed.
logging.getLogger("py4j").setLevel(logging.WARNING)


# Batch reads of "kafka" go through the DataSource V2 reader (Spark's default
# list also has "kafka": its V1 reader turns every record into a Row and
# back, which doubled the CPU per record here; see bench/RESULTS.md).
V1_SOURCES = "avro,csv,json,orc,parquet,text"


class SparkJarsMissing(Exception):
    pass


def is_connect(spark) -> bool:
    """A Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def sql_api(spark):
    """``(functions, Window)`` for the session's kind. pyspark's generic
    ``pyspark.sql.functions`` picks Connect or classic by a process-wide
    environment variable, which a worker that also starts classic job
    processes must not set; so code that serves both kinds asks the session."""
    if is_connect(spark):
        from pyspark.sql.connect import functions
        from pyspark.sql.connect.window import Window
    else:
        from pyspark.sql import Window, functions
    return functions, Window


def spark_dir() -> Path:
    """Where Spark's JVM runs and leaves its files: ``$GAPWATCH_HOME/spark``
    (``.gapwatch/spark`` in the repository when GAPWATCH_HOME is not set)."""
    home = os.environ.get("GAPWATCH_HOME") or str(Path(__file__).resolve().parents[2] / ".gapwatch")
    return Path(home).absolute() / "spark"


@contextmanager
def _jvm_working_directory() -> Iterator[None]:
    """Run the block in ``spark_dir()`` if it is about to start this process's
    JVM (the JVM inherits the working directory and keeps it); otherwise
    change nothing."""
    if SparkContext._gateway is not None:
        yield
        return
    directory = spark_dir()
    directory.mkdir(parents=True, exist_ok=True)
    previous = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(previous)


def connector_jars(jars_dir: Path) -> list[str]:
    jars = sorted(str(path) for path in Path(jars_dir).glob("*.jar"))
    if not any("spark-sql-kafka" in jar for jar in jars):
        raise SparkJarsMissing(f"no spark-sql-kafka connector jar in {jars_dir}; run scripts/setup.sh")
    return jars


# Tries of a task on a local master: Spark's local mode gives each task one
# (a cluster, spark.task.maxFailures, four), so one task failing once failed
# the whole job. A CI run saw it: a handler task's Python worker, started on a
# machine at full load, did not connect back within Spark's fixed 10 s, and
# the backfill failed while its other task was half-way. Two tries were not
# enough on a host at half its speed (a later CI run: both workers missed the
# 10 s); four, as a cluster gives.
LOCAL_TASK_TRIES = 4


# ``local``, ``local[N]``, ``local[*]`` and their ``[N,F]`` forms (F: a task's tries).
LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,(\d+))?\])?")


def with_task_retries(master: str) -> str:
    """``master`` with LOCAL_TASK_TRIES tries a task if it is ``local``,
    ``local[N]`` or ``local[*]``; any other master (one that names its
    tries, a cluster) unchanged."""
    found = LOCAL_MASTER.fullmatch(master)
    if not found or found.group(2) is not None:
        return master
    return f"local[{found.group(1) or 1},{LOCAL_TASK_TRIES}]"


def build_session(*, master: str, app_name: str, jars_dir: Path, driver_memory: str = "768m",
                  extra: dict[str, str] | None = None) -> SparkSession:
    """A session on ``master``. A local master binds the driver to loopback;
    a cluster master (``spark://``, ``yarn``, ``k8s://``) lets Spark pick the
    driver's address, which executors must reach."""
    builder = (
        SparkSession.builder.master(with_task_retries(master))
        .appName(app_name)
        .config("spark.jars", ",".join(connector_jars(jars_dir)))
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.sources.useV1SourceList", V1_SOURCES)
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    with _jvm_working_directory():
        return builder.getOrCreate()
