"""The JVM of Kafka's Java client (adapters.kafka.jvm) maps the class archive
that set-up writes (adapters.kafka.class_archive), and a JVM that cannot use
an archive still starts and reads: its warning must not reach stdout, where
py4j reads the gateway's port and token first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka import jvm
from adapters.kafka.class_archive import write
from adapters.kafka.java_reads import JavaReads


def mapped(gateway, archive: Path) -> bool:
    """The JVM maps the archive's file: the JVM unmaps one it cannot use."""
    return str(archive) in Path(f"/proc/{gateway.java_process.pid}/maps").read_text()


def topic_names(gateway, bootstrap: str) -> set[str]:
    with JavaReads(ClusterConfig(bootstrap), gateway=gateway) as reads:
        return set(reads.topic_ids())


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("class-archive") / "kafka-client.jsa"
    write(path)
    return path


def test_a_written_archive_is_mapped_by_the_next_jvm_which_reads_the_cluster(archive, broker, unique):
    broker.create_topic(f"archived-{unique}", partitions=1)
    assert archive.stat().st_size > 1_000_000, "the archive holds the client's classes"
    gateway = jvm.start_gateway(extra_options=(f"-XX:SharedArchiveFile={archive}",))
    try:
        assert mapped(gateway, archive), "the JVM did not use the archive"
        assert f"archived-{unique}" in topic_names(gateway, broker.bootstrap)
    finally:
        jvm.stop_gateway(gateway)


def another_class_paths_archive(path: Path) -> Path:
    """A valid archive of a JVM whose class path is not the gateway's (Kafka's
    jars alone): one the gateway's JVM refuses with a warning."""
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={path}", "-cp", f"{jvm.kafka_jars_dir()}/*",
                    "org.apache.kafka.tools.TopicCommand", "--version"], check=True, capture_output=True, timeout=120)
    return path


@pytest.mark.parametrize("kind", ["another-class-path", "garbage", "missing"])
def test_a_jvm_that_cannot_use_an_archive_starts_and_reads_as_usual(tmp_path, broker, unique, kind):
    """The first refuses with a warning that Java writes to stdout unless told
    otherwise (JVM_OPTIONS): before the port, py4j would read it as the port."""
    archive = tmp_path / "kafka-client.jsa"
    if kind == "another-class-path":
        another_class_paths_archive(archive)
    elif kind == "garbage":
        archive.write_bytes(b"not an archive")
    broker.create_topic(f"unarchived-{unique}", partitions=1)
    gateway = jvm.start_gateway(extra_options=(f"-XX:SharedArchiveFile={archive}",))
    try:
        assert not mapped(gateway, archive)
        assert f"unarchived-{unique}" in topic_names(gateway, broker.bootstrap)
    finally:
        jvm.stop_gateway(gateway)


def test_the_processs_own_jvm_maps_the_archive_set_up_wrote(broker, unique):
    assert jvm.class_archive().is_file(), "scripts/setup.sh writes it"
    broker.create_topic(f"own-{unique}", partitions=1)
    gateway = jvm.java_gateway()
    try:
        assert mapped(gateway, jvm.class_archive())
        assert f"own-{unique}" in topic_names(gateway, broker.bootstrap)
    finally:
        jvm.gateway_shutdown()
