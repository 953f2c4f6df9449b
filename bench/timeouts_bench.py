"""How long Gapwatch takes to give up on what does not answer: the timings
the tests prove by conditions only (issue 34: no wall-clock assert in a test).

    scripts/env.sh's environment (the local broker up: make services), then
    .venv/bin/python bench/timeouts_bench.py [runs]

- the poll's adapter (librdkafka) against a port where nothing listens,
  timeout 3 s (tests/integration/test_kafka_adapter.py proves the error);
- the Java share-group reader against that port and against a host name that
  does not resolve, timeout 3 s (test_share_groups.py proves the words);
- the LDAP backend against a directory that refuses the connection, with
  LDAP_TIMEOUT 30 s: what a local login pays for it (test_ldap_login.py
  proves the refusal comes from connect(), so no timeout is waited out);
- a backfill of 30,000 records on a Spark Connect server (local[2]) with a
  3 s time-out: from the call to the failure (test_backfill_connect.py proves
  the write was interrupted inside Spark, not run to its end).

Each case runs once unmeasured first (the reader's JVM starts, the Connect
server serves its first session), then ``runs`` times. Prints the median and
range of each; results in bench/RESULTS.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from groups.domain.cluster_config import ClusterConfig  # noqa: E402
from groups.domain.planning import BackfillRange  # noqa: E402
from groups.web.ldap_login import DirectoryBackend  # noqa: E402
from tasks.backfill.runner import BackfillFailed, BackfillRequest, run_backfill  # noqa: E402
from adapters.kafka.adapter import KafkaAdapter, KafkaUnavailable  # noqa: E402
from adapters.kafka.jvm import gateway_shutdown  # noqa: E402
from adapters.kafka.java_admin import JavaAdmin  # noqa: E402
from tests.harness.processes import free_ports  # noqa: E402
from tests.harness.connect import ConnectServer  # noqa: E402
from tests.harness.kafka_clients import Broker  # noqa: E402

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NOWHERE = "127.0.0.1:1"  # nothing listens on port 1 of the loopback
RECORDS = 30_000  # as the test's BIG: 15 Spark tasks of 2,000 records


def seconds(action, expected: type[BaseException]) -> float:
    started = time.monotonic()
    try:
        action()
    except expected:
        return time.monotonic() - started
    raise AssertionError(f"{action} did not raise {expected.__name__}")


def adapter_unreachable() -> float:
    adapter = KafkaAdapter(ClusterConfig(bootstrap_servers=NOWHERE), timeout=3.0)
    return seconds(lambda: adapter.snapshot(cluster="dead", now=NOW), KafkaUnavailable)


def share_reader(address: str):
    def run() -> float:
        with JavaAdmin(ClusterConfig(address), timeout=3) as reader:
            return seconds(reader.list_group_ids, KafkaUnavailable)
    return run


def ldap_refused() -> float:
    (port,) = free_ports(1)
    with override_settings(LDAP_SERVER_URI=f"ldap://127.0.0.1:{port}", LDAP_TIMEOUT=30,
                           LDAP_USER_SEARCH_BASE="ou=people,dc=example,dc=org"):
        started = time.monotonic()
        assert DirectoryBackend().authenticate(None, username="someone", password="secret") is None
        return time.monotonic() - started


class ConnectTimeout:
    """A 3 s time-out of a backfill of RECORDS on one Connect server (started once)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.broker = Broker(os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
        self.topic = f"timeouts-bench-{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(self.topic, 1)
        self.broker.produce(self.topic, 0, RECORDS)
        self.server = ConnectServer(folder / "server.log")

    def __call__(self) -> float:
        request = BackfillRequest(
            run_id=f"slow-{uuid.uuid4().hex[:8]}", cluster=ClusterConfig(self.broker.bootstrap), sink="parquet",
            output=str(self.folder / "out"), ranges=(BackfillRange(self.topic, 0, 0, RECORDS),), timeout_seconds=3,
            spark_connect=self.server.url, spark_connect_token=self.server.token)
        started = time.monotonic()
        try:
            run_backfill(request)
        except BackfillFailed as failure:
            (attempt,) = failure.result["attempts"]
            # 1: interrupted inside Spark; -1: still running when the runner stopped waiting for it.
            print(f"  (attempt {attempt['outcome']}, return code {attempt['returncode']})", file=sys.stderr)
            return time.monotonic() - started
        raise AssertionError("the backfill did not time out")

    def close(self) -> None:
        self.server.stop()
        self.broker.close()


def main(runs: int) -> None:
    print(f"| what | median s | min-max s ({runs} runs) |\n|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="gapwatch-timeouts-bench-") as folder:
        settings.BACKFILL_OUTPUT = str(Path(folder) / "out")
        connect = ConnectTimeout(Path(folder))
        cases = {
            f"adapter snapshot, {NOWHERE}, timeout 3 s": adapter_unreachable,
            f"share-group reader, {NOWHERE}, timeout 3 s": share_reader(NOWHERE),
            "share-group reader, unresolvable host, timeout 3 s": share_reader("no-such-host.invalid:9092"),
            "LDAP backend, connection refused, LDAP_TIMEOUT 30 s": ldap_refused,
            f"backfill of {RECORDS:,} records on a Connect server, time-out 3 s": connect,
        }
        try:
            for name, case in cases.items():
                case()  # warm: the share reader's JVM, the Connect server's first session
                times = [case() for _ in range(runs)]
                print(f"| {name} | {statistics.median(times):.2f} | {min(times):.2f}-{max(times):.2f} |",
                      flush=True)
        finally:
            connect.close()
            gateway_shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
