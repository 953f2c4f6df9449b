"""Builds Spark sessions that read Kafka with local connector jars only.

The jars come from the setup step (Maven); ``spark.jars.packages`` is never
used, because it resolves over the network at run time.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import SparkSession

# py4j logs at INFO from __del__ during interpreter shutdown, after handlers closed.
logging.getLogger("py4j").setLevel(logging.WARNING)


# Batch reads of "kafka" go through the DataSource V2 reader (Spark's default
# list also has "kafka": its V1 reader turns every record into a Row and
# back, which doubled the CPU per record here; see bench/RESULTS.md).
V1_SOURCES = "avro,csv,json,orc,parquet,text"


class SparkJarsMissing(Exception):
    pass


def connector_jars(jars_dir: Path) -> list[str]:
    jars = sorted(str(path) for path in Path(jars_dir).glob("*.jar"))
    if not any("spark-sql-kafka" in jar for jar in jars):
        raise SparkJarsMissing(f"no spark-sql-kafka connector jar in {jars_dir}; run scripts/setup.sh")
    return jars


def build_session(*, master: str, app_name: str, jars_dir: Path, driver_memory: str = "768m",
                  extra: dict[str, str] | None = None) -> SparkSession:
    """A session on ``master``. A local master binds the driver to loopback;
    a cluster master (``spark://``, ``yarn``, ``k8s://``) lets Spark pick the
    driver's address, which executors must reach."""
    builder = (
        SparkSession.builder.master(master)
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
    return builder.getOrCreate()
