"""Class-data-sharing archives of the tests' own Kafka JVMs with the local
broker's jars: the KRaft nodes the harness starts (``broker``) and Kafka's
console tools (``tools``). Set-up writes them from one broker's run
(``scripts/setup.sh tests``):

    python -m tests.harness.class_archives

and each such JVM maps the archive of its kind (``java_options``): a node
starts on about 1.5 CPU-seconds instead of 2.2, a console consumer on 0.6
instead of 1.0. A JVM whose class path or Java does not match an archive
ignores it and starts as usual; its warning goes to stderr, never into a
console tool's records on stdout. Another release's jars (the release
matrix) have no archive.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adapters.kafka.jvm import WARNINGS_TO_STDERR

ROOT = Path(__file__).resolve().parents[2]
GAPWATCH_HOME = Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch"))
KAFKA_LIBS = GAPWATCH_HOME / "lib" / "kafka"
# Under lib/: made again when the jars are fetched again (setup.sh empties lib/).
ARCHIVES = GAPWATCH_HOME / "lib" / "kafka-test-archives"
KINDS = ("broker", "tools")


def archive_of(kind: str) -> Path:
    return ARCHIVES / f"{kind}.jsa"


def java_options(kind: str, libs: Path | str = KAFKA_LIBS) -> list[str]:
    """The options that map ``kind``'s archive in a JVM whose class path is
    ``libs``' jars; none for other jars, or before set-up wrote it."""
    archive = archive_of(kind)
    if Path(libs).resolve() != KAFKA_LIBS.resolve() or not archive.is_file():
        return []
    return [f"-XX:SharedArchiveFile={archive}", *WARNINGS_TO_STDERR]


def write() -> None:
    """One node and one console consumer, each dumping its classes when it
    exits cleanly (the node on SIGTERM, the consumer after its records), with
    topics, a classic and a consumer-protocol group and a transaction between."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.harness.processes import KafkaCluster

    ARCHIVES.mkdir(parents=True, exist_ok=True)
    # The JVMs below must not map the archives they replace: Java refuses to
    # write an archive on top of a mapped one of its kind and does not start.
    for kind in KINDS:
        archive_of(kind).unlink(missing_ok=True)
    written = {kind: ARCHIVES / f".{kind}-{os.getpid()}.jsa" for kind in KINDS}

    class ArchivingCluster(KafkaCluster):
        def _java(self, *args: str) -> list[str]:
            command = super()._java(*args)
            if args[0] != "kafka.Kafka":
                return command
            return [command[0], f"-XX:ArchiveClassesAtExit={written['broker']}", *command[1:]]

    with tempfile.TemporaryDirectory() as folder:
        cluster = ArchivingCluster(Path(folder), nodes=1).start()
        try:
            bootstrap = cluster.bootstrap
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("archive", 2)])["archive"].result()
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "archive"})
            producer.init_transactions()
            producer.begin_transaction()
            for index in range(20):
                producer.produce("archive", f"record {index}".encode(), partition=index % 2)
            producer.commit_transaction()
            for protocol in ("classic", "consumer"):
                consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"archive-{protocol}",
                                     "group.protocol": protocol, "auto.offset.reset": "earliest"})
                consumer.subscribe(["archive"])
                received, deadline = 0, time.monotonic() + 60
                while received < 20 and time.monotonic() < deadline:
                    message = consumer.poll(1)
                    received += message is not None and message.error() is None
                consumer.commit(asynchronous=False)
                consumer.close()
            subprocess.run(
                ["java", f"-XX:ArchiveClassesAtExit={written['tools']}", "-Xmx96m", "-XX:+UseSerialGC",
                 "-XX:TieredStopAtLevel=1", "-cp", f"{KAFKA_LIBS}/*", "org.apache.kafka.tools.consumer.ConsoleConsumer",
                 "--bootstrap-server", bootstrap, "--topic", "archive", "--group", "archive-tools",
                 "--from-beginning", "--max-messages", "20", "--property", "print.partition=true",
                 "--property", "print.offset=true"],
                check=True, capture_output=True, timeout=120)
        finally:
            cluster.stop_node(1)  # SIGTERM: a clean exit writes the node's archive
            cluster.close()
    try:
        for kind, path in written.items():
            if not path.is_file() or path.stat().st_size == 0:
                sys.exit(f"no {kind} archive was written")
            path.replace(archive_of(kind))
    finally:
        for path in written.values():
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    write()
