"""Backfills from a secured broker on the standalone Spark cluster
(``spark_cluster``), as a process of the job's own and through a Spark
Connect server whose master is the cluster: the executors on the workers
get the TLS trust and client key as PEM options (no file anywhere) and the
JAAS config built from the stored secret, and deliver exactly the range; the
replay topic too (the kafka sink's producer runs on the executors).

No secret is written down anywhere Spark writes: the job's spec file and
log, the Connect server's log, every application's event log (what Spark's
UI and history server show: environment, SQL plans, the Connect
operations' plan text), the executors' logs and launch commands on the
workers, and the master's status page. (No application UI runs: the job's
session and the server disable it; the event log holds what it would show.)

The broker is the module's own without the OAuth listener
(``secure_kafka.secure_broker``: no Keycloak), so this module runs beside
the other cluster tests on one xdist worker (tests/xdist_schedule.py). The
Connect server is the session's (``cluster_server``), shared with the other
cluster tests: its log holds their jobs too, and no secret of these."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groups.models import RemediationJob
from adapters.spark.spec import KafkaSecrets
from tests.harness.backfills import K, Scenario, parquet_rows, replayed_rows, run_job
from tests.harness.kafka_clients import Broker
from tests.harness.secure_kafka import (  # noqa: F401 - secure_broker is a fixture
    CLIENT_NAME,
    connect_through,
    replay_acls,
    secret_fragments,
    secure_broker,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def written_by_spark(cluster) -> dict[str, str]:
    """Every file Spark wrote on the cluster's side, by path: the event logs
    of all applications and, per worker, each executor's stdout and stderr
    (its launch command included); and the master's status page."""
    files = [*Path(cluster.event_logs).iterdir(), *Path(cluster.workdir).glob("worker*/app-*/*/std*")]
    texts = {str(path): path.read_text(errors="replace") for path in files if path.is_file()}
    texts["master /json/"] = json.dumps(cluster.state())
    return texts


def assert_no_secret(secrets, texts: dict[str, str]) -> None:
    found = [(where, fragment[:8] + "…") for where, text in texts.items() for fragment in secret_fragments(secrets)
             if fragment in text]
    assert not found, f"a secret was written down: {found}"


def secured_scenario(kafka, unique: str, listener: str, sink: str) -> tuple[Scenario, Broker]:
    """The backfill scenario on the secured broker (set up through its
    PLAINTEXT listener), its cluster connecting through ``listener``, with
    the replay topic's ACLs for a kafka sink."""
    broker = Broker(kafka.listeners.plaintext)
    scenario = Scenario(broker, f"ss-{listener}-{unique}", f"secured-{listener}-{unique}", K, sink=sink)
    connect_through(scenario.cluster, kafka, listener, client=kafka.client(CLIENT_NAME))
    if sink == "kafka":
        principal = "User:gapwatch" if listener == "scram" else f"User:CN={CLIENT_NAME}"
        kafka.grant(principal, replay_acls(scenario.replay_topic()))
    return scenario, broker


def delivered_exactly(scenario: Scenario, broker: Broker, job: RemediationJob, sink: str) -> None:
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    if sink == "kafka":
        assert sorted(replayed_rows(broker, scenario.topic, f"{scenario.topic}.replay")) == scenario.expected_rows()
    else:
        assert parquet_rows(job.result["sink"]["output"]) == scenario.expected_rows()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("listener", "sink"), [("scram", "kafka"), ("mtls", "parquet")])
def test_a_job_process_on_the_cluster_backfills_exactly_from_a_secured_broker_and_writes_no_secret_down(
    secure_broker, listener, sink, unique, approver, enqueued, on_cluster, job_files  # noqa: F811
):
    scenario, broker = secured_scenario(secure_broker, unique, listener, sink)
    try:
        job = run_job(scenario.request_job(approver, sink).id)

        delivered_exactly(scenario, broker, job, sink)
        assert [a["mode"] for a in job.result["attempts"]] == ["process"]
        (application,) = on_cluster.applications(f"gapwatch-backfill-{job.id}")
        assert on_cluster.successes_by_worker(application["id"]), "the executors on the workers read"
        secrets = KafkaSecrets.of(scenario.cluster.cluster_config()).values
        assert_no_secret(secrets, {**written_by_spark(on_cluster), "spec": "".join(job_files["specs"]),
                                   "job log": "".join(job_files["logs"]), "job": str(job.result) + job.error})
    finally:
        broker.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("listener", "sink"), [("scram", "parquet"), ("mtls", "kafka")])
def test_a_connect_server_on_the_cluster_backfills_exactly_from_a_secured_broker_and_writes_no_secret_down(
    secure_broker, listener, sink, unique, approver, enqueued, on_server, spark_cluster, job_files  # noqa: F811
):
    scenario, broker = secured_scenario(secure_broker, unique, listener, sink)
    try:
        job = run_job(scenario.request_job(approver, sink).id)

        delivered_exactly(scenario, broker, job, sink)
        assert [a["mode"] for a in job.result["attempts"]] == ["connect"]
        secrets = KafkaSecrets.of(scenario.cluster.cluster_config()).values
        # The session is closed: the server logged what it logs of a closed session's operations.
        assert_no_secret(secrets, {**written_by_spark(spark_cluster), "server log": on_server.log_text(),
                                   "spec": "".join(job_files["specs"]), "job log": "".join(job_files["logs"]),
                                   "job": str(job.result) + job.error})
    finally:
        broker.close()
