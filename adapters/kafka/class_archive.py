"""Writes a class-data-sharing archive of the classes the JVM of Kafka's Java
client (``adapters.kafka.jvm``) loads for a poll's reads, so that later ones
(each Celery worker process starts its own) map them instead of loading and
verifying them again: a new worker's first reads cost about 0.7 CPU-seconds
instead of 1.25 (bench/RESULTS.md, "Kafka client JVM start").

    python -m adapters.kafka.class_archive ARCHIVE

``scripts/setup.sh`` runs it once per Java and Kafka client version, before
any broker runs: the reads go to a closed port and fail, which loads what a
poll's reads load but the answers' parsing (measured: the same start cost as
an archive written beside a broker). ``adapters.kafka.jvm`` maps the archive
when it exists; a JVM whose class path or Java does not match it ignores it
and starts as usual, its warning on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka.errors import KafkaUnavailable
from adapters.kafka.java_reads import JavaReads
from adapters.kafka.jvm import start_gateway, stop_gateway

# Nothing listens on port 1: every call fails at once, after loading its classes.
NOWHERE = "127.0.0.1:1"


def write(archive: Path) -> None:
    """Start a JVM that dumps its classes to ``archive`` when it exits, run
    every read of a poll against a closed port, and stop it cleanly."""
    gateway = start_gateway(extra_options=(f"-XX:ArchiveClassesAtExit={archive}",))
    try:
        with JavaReads(ClusterConfig(NOWHERE), timeout=1.0, gateway=gateway) as reads:
            for read in (reads.topic_ids, reads.partition_counts, lambda: reads.read_groups(["-"]),
                         lambda: reads.topic_readers(["-"], {"-": 1})):
                try:
                    read()
                except KafkaUnavailable:
                    pass
    finally:
        stop_gateway(gateway, exit_timeout=300)


if __name__ == "__main__":
    write(Path(sys.argv[1]))
