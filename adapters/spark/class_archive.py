"""Writes a class-data-sharing archive of the classes a Spark JVM loads, so
that later Spark JVMs (a job's own process, the Connect server) map them
instead of loading and verifying them again: a local session starts in about
2 s instead of 4-11 s on 2 cores (docs/development.md).

    SPARK_SUBMIT_OPTS="-XX:ArchiveClassesAtExit=ARCHIVE" python -m adapters.spark.class_archive

``scripts/setup.sh`` runs it once per Java and pyspark version and
``scripts/env.sh`` hands the archive to every ``spark-submit`` through
``SPARK_SUBMIT_OPTS`` (``-XX:SharedArchiveFile``). A JVM whose class path or
Java does not match the archive ignores it and starts as usual.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def warm_up(jars_dir: Path) -> None:
    """Start a local session and run what a backfill runs besides Kafka (a
    query, a count, a Parquet write), so those classes are archived too."""
    from adapters.spark.session import build_session

    spark = build_session(master="local[1]", app_name="gapwatch-class-archive", jars_dir=jars_dir,
                          driver_memory="512m")
    jvm = spark.sparkContext._gateway.proc
    try:
        frame = spark.range(1000).selectExpr("id", "id % 4 as partition", "cast(id as string) as value")
        frame.groupBy("partition").count().collect()
        with tempfile.TemporaryDirectory() as folder:
            frame.write.parquet(str(Path(folder) / "warm-up"))
    finally:
        spark.stop()
    # The JVM ends when its stdin closes, and writes the archive as it exits.
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    warm_up(Path(sys.argv[1]))
