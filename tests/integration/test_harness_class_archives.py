"""The tests' own Kafka JVMs (tests/harness/class_archives.py) load their
classes from the archives set-up wrote, and a JVM refusing an archive keeps
its warning off stdout, where a console tool's records are read."""

from __future__ import annotations

import subprocess

import pytest

from adapters.kafka import jvm
from tests.harness import class_archives
from tests.harness.class_archives import KAFKA_LIBS, java_options
from tests.harness.kafka_clients import kafka_jars, kafka_tool


def loaded_from_archive(kind: str, main_class: str) -> bool:
    """Whether ``main_class`` came out of the archive in a JVM with ``kind``'s options."""
    done = subprocess.run(["java", *java_options(kind), "-Xlog:class+load=info:stdout", "-cp", kafka_jars(),
                           main_class, "--version"], capture_output=True, text=True, timeout=120)
    line = next(line for line in done.stdout.splitlines() if f" {main_class} source:" in line)
    return "shared objects file" in line


@pytest.mark.parametrize("kind, main_class", [("broker", "kafka.Kafka"),
                                              ("tools", "org.apache.kafka.tools.consumer.ConsoleConsumer")])
def test_set_up_wrote_each_archive_and_its_jvm_loads_from_it(kind, main_class):
    assert class_archives.archive_of(kind).is_file(), "scripts/setup.sh tests writes it"
    assert loaded_from_archive(kind, main_class)


def test_another_releases_jars_get_no_archive(tmp_path):
    assert java_options("broker", KAFKA_LIBS) and java_options("broker", tmp_path) == []


def test_a_tool_refusing_an_archive_prints_only_its_own_output(monkeypatch):
    # The product's client archive was written for another class path (py4j's jar first).
    assert jvm.class_archive().is_file(), "scripts/setup.sh writes it"
    monkeypatch.setattr(class_archives, "archive_of", lambda kind: jvm.class_archive())
    assert not loaded_from_archive("tools", "org.apache.kafka.tools.consumer.ConsoleConsumer")
    printed = kafka_tool("org.apache.kafka.tools.TopicCommand", "--version")
    assert "warning" not in printed and printed.strip()[:1].isdigit(), printed
