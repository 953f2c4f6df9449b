"""The Spark Connect side of backfills without a server: connection strings,
the server's command line, the output file operations, the handler's
per-partition function and the code shipped to a session's Python workers."""

from __future__ import annotations

import json
import os
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from adapters.spark import connect
from adapters.spark.sinks.code_archive import code_archive
from adapters.spark.sinks.files import OutputFiles
from adapters.spark.sinks.handler_call import handler_partition

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("url", "token", "session_id", "expected", "why"), [
    ("sc://localhost:15002", "t0k", "", "sc://localhost:15002/;token=t0k", "the token as a parameter"),
    ("sc://127.0.0.1:15002", "t0k", "", "sc://localhost:15002/;token=t0k",
     "pyspark sends a token on a host other than localhost only over TLS"),
    ("sc://127.0.0.1:15002", "", "", "sc://127.0.0.1:15002/", "no token: the address as given"),
    ("sc://spark.example:443", "t0k", "", "sc://spark.example:443/;token=t0k", "a remote host keeps its name (TLS)"),
    ("sc://localhost", "t0k", "abc", "sc://localhost:15002/;token=t0k;session_id=abc",
     "the default port; an existing session by its id"),
    ("sc://localhost:1/;use_ssl=true;token=old", "new", "", "sc://localhost:1/;use_ssl=true;token=new",
     "other parameters kept, a token in the URL replaced"),
])
def test_it_builds_the_connection_string(url, token, session_id, expected, why):
    assert connect.client_url(url, token=token, session_id=session_id) == expected, why


@pytest.mark.parametrize("url", ["http://localhost:15002", "localhost:15002", "sc://"])
def test_it_refuses_a_url_that_is_not_sc(url):
    with pytest.raises(ValueError, match="sc://host:port"):
        connect.client_url(url, token="")


def test_the_server_address_never_carries_the_token():
    assert connect.server_address("sc://localhost:1234/;token=secret") == "localhost:1234"
    assert connect.server_address("sc://spark.example") == "spark.example:15002"


def test_a_tag_names_the_job_and_its_attempt():
    assert connect.job_tag("42", "5f0c") == "gapwatch-backfill-42-5f0c"


def conf_of(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_server_command_runs_sparks_own_connect_server_with_the_jars_and_cache_settings():
    command = connect.server_command(master="local[2]", host="127.0.0.1", port=15099, jars=["/j/a.jar", "/j/b.jar"],
                                     driver_memory="1g", spark_home="/spark")
    assert command[:3] == ["/spark/bin/spark-submit", "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    assert command[command.index("--master") + 1] == "local[2,4]"  # a task is tried four times, as on a cluster
    assert command[command.index("--jars") + 1] == "/j/a.jar,/j/b.jar"
    assert command[command.index("--driver-memory") + 1] == "1g"
    conf = conf_of(command)
    assert conf["spark.connect.grpc.binding.port"] == "15099"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.kafka.consumer.cache.timeout"] == "30s"
    assert conf["spark.connect.execute.manager.detachedTimeout"] == "30s"
    assert conf["spark.driver.host"] == "127.0.0.1"  # a local master binds its driver to loopback
    assert conf["spark.default.parallelism"] == "2"  # a Connect client cannot ask the SparkContext
    assert not any("token" in arg.lower() and "=" in arg and "redaction" not in arg for arg in command)
    assert conf["spark.sql.redaction.string.regex"], "plans printed as text are redacted too"


def test_the_server_logs_with_a_configuration_that_keeps_closed_sessions_plans_out_of_its_log():
    command = connect.server_command(master="local[2]", host="127.0.0.1", port=15099, jars=["/j/a.jar"],
                                     driver_memory="1g", spark_home="/spark", log_config=Path("/h/log4j2.properties"))
    assert conf_of(command)["spark.driver.extraJavaOptions"].endswith(" -Dlog4j2.configurationFile=/h/log4j2.properties")
    assert ("logger.executions.name = org.apache.spark.sql.connect.service.SparkConnectExecutionManager\n"
            "logger.executions.level = warn\n") in connect.LOG_CONFIG
    assert "rootLogger.level = info" in connect.LOG_CONFIG, "the server's start line stays in its log"


def test_the_servers_jvm_gives_its_heap_and_c_heap_back_when_idle():
    command = connect.server_command(master="local[2]", host="127.0.0.1", port=15099, jars=["/j/a.jar"],
                                     driver_memory="1g", spark_home="/spark")
    options = conf_of(command)["spark.driver.extraJavaOptions"].split()
    assert "-XX:+UseG1GC" in options and "-XX:+UseParallelGC" not in options
    assert any(option.startswith("-XX:G1PeriodicGCInterval=") and not option.endswith("=0") for option in options)
    assert "-XX:MaxHeapFreeRatio=30" in options
    assert any(option.startswith("-XX:TrimNativeHeapInterval=") for option in options)
    assert conf_of(command)["spark.python.worker.reuse"] == "false", "the handler's Python workers do not idle"
    assert conf_of(command)["spark.kafka.producer.cache.timeout"] == "30s", "nor the replay's producer"


@pytest.mark.parametrize(("master", "cores"), [("local", 1), ("local[3]", 3), ("local[3,2]", 3),
                                               ("local[*]", os.cpu_count()), ("local[*,4]", os.cpu_count())])
def test_it_counts_the_task_slots_of_a_local_master(master, cores):
    assert connect.local_cores(master) == cores


@pytest.mark.parametrize("master", ["localhost", "local[]", "local[x]", "spark://h:7077"])
def test_it_refuses_what_is_not_a_local_master(master):
    with pytest.raises(ValueError, match="not a local master"):
        connect.local_cores(master)


def test_a_cluster_master_lets_spark_choose_the_drivers_address():
    command = connect.server_command(master="spark://10.0.0.5:7077", host="0.0.0.0", port=15002, jars=["/j/a.jar"],
                                     driver_memory="2g", spark_home="/spark")
    assert "spark.driver.host" not in conf_of(command)
    assert command[command.index("--master") + 1] == "spark://10.0.0.5:7077"


def test_only_a_local_masters_python_workers_connect_back_before_importing_pyspark():
    local = conf_of(connect.server_command(master="local[2]", host="127.0.0.1", port=15002, jars=["/j/a.jar"],
                                           driver_memory="1g", spark_home="/spark"))
    assert local["spark.python.worker.module"] == "adapters.spark.python_worker"
    cluster = conf_of(connect.server_command(master="spark://10.0.0.5:7077", host="0.0.0.0", port=15002,
                                             jars=["/j/a.jar"], driver_memory="2g", spark_home="/spark"))
    assert "spark.python.worker.module" not in cluster, "a cluster's executors do not have this project"


def test_a_cluster_masters_executors_give_memory_back_as_the_driver_does():
    command = connect.server_command(master="spark://10.0.0.5:7077", host="0.0.0.0", port=15002, jars=["/j/a.jar"],
                                     driver_memory="2g", spark_home="/spark")
    conf = conf_of(command)
    executor = conf["spark.executor.defaultJavaOptions"].split()
    assert executor[0] == "-XX:+IgnoreUnrecognizedVMOptions", "a cluster's older Java still starts its executors"
    assert executor[1:] == conf["spark.driver.extraJavaOptions"].split()
    assert "spark.executor.extraJavaOptions" not in conf, "the cluster's own executor options are left to it"
    local = conf_of(connect.server_command(master="local[2]", host="127.0.0.1", port=15002, jars=["/j/a.jar"],
                                           driver_memory="1g", spark_home="/spark"))
    assert "spark.executor.defaultJavaOptions" not in local, "local[*] executors are the driver's threads"


def test_the_compose_files_connect_server_has_the_settings_the_local_stack_starts_it_with():
    """docker-compose.yml spells the server's command out; it drifted once
    (an old collector, no producer cache timeout) while it said "keep in sync"."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    spelled = [arg.removeprefix("--conf=") for arg in compose["services"]["spark-connect"]["command"]
               if arg.startswith("--conf=")]
    command = connect.server_command(master="spark://spark-master:7077", host="127.0.0.1", port=15002,
                                     jars=["/j/a.jar"], driver_memory="1g", spark_home="/spark")
    assert spelled == [f"{key}={value}" for key, value in conf_of(command).items()]


def test_the_retry_policy_is_cut_to_about_the_seconds_asked_for():
    class Policy:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    for seconds, retries in [(0, 0), (2, 3), (5, 5), (10, 7)]:
        # Back-offs 0.2, 0.4, 0.8, 1.6, then 2 s each, while their sum stays within the seconds.
        assert connect._policy(Policy, seconds).kwargs["max_retries"] == retries, seconds


def test_output_files_on_a_local_folder(tmp_path):
    files = OutputFiles()
    staging = tmp_path / "out" / "_staging"
    (staging / "7-a1" / "topic=t").mkdir(parents=True)
    (staging / "7-a1" / "topic=t" / "part.parquet").write_bytes(b"x")
    (staging / "7-a2").mkdir()
    (staging / "70-a1").mkdir()
    assert sorted(files.siblings(str(staging), "7-")) == [f"{staging}/7-a1", f"{staging}/7-a2"]
    assert files.siblings(str(tmp_path / "missing"), "7-") == []
    files.write_text(f"{staging}/7-a1/_gapwatch.json", '{"job_id": "7"}')
    files.rename(f"{staging}/7-a1", str(tmp_path / "out" / "7"))
    assert json.loads((tmp_path / "out" / "7" / "_gapwatch.json").read_text()) == {"job_id": "7"}
    assert files.exists(str(tmp_path / "out" / "7" / "topic=t" / "part.parquet"))
    files.delete(f"{staging}/7-a2")
    files.delete(f"{staging}/7-missing")  # nothing there: nothing to do
    assert not files.exists(f"{staging}/7-a2") and files.exists(f"{staging}/70-a1")
    assert files.exists(f"file://{tmp_path}/out/7")


def test_a_file_system_that_cannot_move_folders_gets_a_copy_then_a_delete(tmp_path, monkeypatch):
    """Arrow's S3 file system refuses to move a folder; the local one stands in for it here."""
    from pyarrow import fs

    monkeypatch.setattr(OutputFiles, "_resolve", lambda self, uri: (Mover(fs.LocalFileSystem()), uri))
    source = tmp_path / "staging"
    (source / "topic=t" / "partition=2").mkdir(parents=True)
    (source / "topic=t" / "partition=2" / "part-0.parquet").write_bytes(b"p0")
    (source / "_gapwatch.json").write_text("{}")

    OutputFiles().rename(str(source), str(tmp_path / "final"))

    assert (tmp_path / "final" / "topic=t" / "partition=2" / "part-0.parquet").read_bytes() == b"p0"
    assert (tmp_path / "final" / "_gapwatch.json").read_text() == "{}"
    assert not source.exists()


class Mover:
    """A file system whose move refuses, as Arrow's S3 does for folders; the rest is the wrapped one's."""

    def __init__(self, inner):
        self.inner = inner

    def move(self, source, target):
        raise NotImplementedError("moving directories is not supported")

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_output_files_refuse_a_scheme_no_file_system_knows():
    with pytest.raises(Exception, match="Unrecognized filesystem type in URI: nosuchfs://b/x"):
        OutputFiles().exists("nosuchfs://b/x")


pulled_records: list[dict] = []


def pull_three(records) -> None:
    """A handler that stops after three records."""
    for _, record in zip(range(3), records):
        pulled_records.append(record)


def test_the_handler_gets_every_record_as_a_dict_and_what_it_pulled_is_counted():
    pulled_records.clear()
    stamp = datetime(2026, 11, 24, tzinfo=UTC)
    batch = pa.RecordBatch.from_pylist([
        {"key": b"k", "value": b"v", "topic": "t", "partition": 2, "offset": offset, "timestamp": stamp,
         "headers": [{"key": "h", "value": b"1"}]}
        for offset in (5, 6, 8, 9)
    ])
    (result,) = handler_partition(f"{__name__}.pull_three")(iter([batch]))
    assert result.to_pylist() == [{"topic": "t", "partition": 2, "pulled": 3, "runs": json.dumps([[5, 7], [8, 9]])}]
    assert pulled_records[0] == {"key": b"k", "value": b"v", "topic": "t", "partition": 2, "offset": 5,
                                 "timestamp": stamp, "headers": [("h", b"1")]}


def test_the_shipped_code_holds_the_job_and_a_project_handler_with_its_packages(tmp_path):
    names = zipfile.ZipFile(code_archive("tests.unit.test_spark_connect.pull_three", tmp_path)).namelist()
    assert {"adapters/__init__.py", "adapters/spark/__init__.py", "adapters/spark/sinks/handler_call.py",
            "groups/__init__.py", "groups/domain/planning.py", "tests/__init__.py", "tests/unit/__init__.py",
            "tests/unit/test_spark_connect.py"} <= set(names)
    assert not any(name.startswith(("groups/models", "tests/integration")) for name in names)
    names = zipfile.ZipFile(code_archive("builtins.list", tmp_path)).namelist()
    assert not any(name.startswith("tests/") for name in names)  # installed elsewhere: not shipped
