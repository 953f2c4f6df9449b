"""Gapwatch against a secured broker (tests/integration/secure_kafka.py): one
scenario per listener — TLS with a private CA, mutual TLS with an encrypted
client key, SCRAM-SHA-512 over TLS — each registered through the cluster
form and service with its PEM and secrets, polled, with a real `latest`
consumer's loss on a new partition found, reset and backfilled by Spark
(a process of its own, local mode). The test's own setup (topics, producers,
consumers) uses the broker's PLAINTEXT listener; Gapwatch only the secured one.

Not here: OAUTHBEARER against a real identity provider (its settings and
option mapping are unit-tested: tests/unit/test_cluster_config.py,
test_spark_kafka_options.py).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset
import pytest

from groups.cluster_forms import ClusterForm
from groups.models import AuditEvent, Cluster, RemediationJob
from groups.services.clusters import cluster_create
from groups.services.remediation import job_request
from tasks import connection
from tasks.backfill import runner
from tasks.jobs import run_remediation_job
from tasks.polling import poll_cluster
from tests.integration.kafka_harness import Broker, GroupConsumer, wait_until
from tests.integration.scenarios import committed, findings, poll, start_consuming_group
from tests.integration.secure_kafka import CLIENT_NAME, SCRAM_USER, secure_kafka  # noqa: F401 - a fixture
from tests.pki import CertificateAuthority

K = 20  # messages written to the new partition before the groups pick it up


@pytest.fixture
def backfill_settings(settings, tmp_path):
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.SPARK_MASTER = "local[2]"
    settings.SPARK_CONNECT_URL = ""
    settings.BACKFILL_TIMEOUT_SECONDS = 300
    return settings


@pytest.fixture
def enqueued(monkeypatch):
    """Jobs handed to Celery after commit; the tests run them with the real task function."""
    job_ids: list[int] = []
    monkeypatch.setattr("groups.services.remediation._enqueue_on_commit", job_ids.append)
    return job_ids


@pytest.fixture
def job_files(monkeypatch):
    """The spec file and the whole log of every backfill attempt, as written."""
    seen = {"specs": [], "logs": []}
    real_launch, real_tail = runner.launch, runner._tail

    def launch(spec, *, spec_path, **kwargs):
        seen["specs"].append(Path(spec_path).read_text())
        return real_launch(spec, spec_path=spec_path, **kwargs)

    def tail(path, *args, **kwargs):
        seen["logs"].append(Path(path).read_text(errors="replace") if Path(path).exists() else "")
        return real_tail(path, *args, **kwargs)

    monkeypatch.setattr(runner, "launch", launch)
    monkeypatch.setattr(runner, "_tail", tail)
    return seen


def register(user, name: str, fields: dict, secrets: dict) -> Cluster:
    """Through the cluster form (its checks) and the audited service, as the pages do."""
    form = ClusterForm(data={"name": name, "sasl_mechanism": "", "sasl_username": "", **fields, **secrets})
    assert form.is_valid(), form.errors
    return cluster_create(user=user, data=form.cleaned_data, secrets=form.secrets)


def listener_settings(kafka, listener: str) -> tuple[dict, dict]:
    """The form's fields and secrets for one listener of the secured broker."""
    tls = {"ssl_ca_pem": kafka.ca.certificate_pem}
    if listener == "ssl":
        return {"bootstrap_servers": kafka.listeners.ssl, "security_protocol": "SSL", **tls}, {}
    if listener == "mtls":
        client = kafka.client(CLIENT_NAME)
        return ({"bootstrap_servers": kafka.listeners.mtls, "security_protocol": "SSL", **tls,
                 "ssl_certificate_pem": client.certificate_pem},
                {"ssl_key_pem": client.key_pem("key-pass-never-shown"), "ssl_key_password": "key-pass-never-shown"})
    return ({"bootstrap_servers": kafka.listeners.sasl_ssl, "security_protocol": "SASL_SSL", **tls,
             "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": SCRAM_USER},
            {"sasl_password": kafka.scram_password})


def two_groups_missing_k(broker: Broker, cluster: Cluster, topic: str, group_ids: list[str]) -> None:
    """Two `latest` groups read partitions 0 and 1; the topic grows a
    partition 2, K messages are written to it, and each group picks it up
    at its end after a restart: each misses those K, and its first commit
    on partition 2 turns its finding into a gap."""
    broker.create_topic(topic, 2)
    consumers = [start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest")
                 for group_id in group_ids]
    broker.raise_partitions(topic, 3)
    broker.produce(topic, 2, K)
    poll(cluster)
    assert all(findings(topic, group_id)[2].state == "pending" for group_id in group_ids)
    for consumer in consumers:
        consumer.close()
    consumers = [GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest") for group_id in group_ids]
    try:
        wait_until(lambda: all(c.assigned == {0, 1, 2} for c in consumers), what="partition 2 assigned")

        def both_read_and_committed() -> bool:
            broker.produce(topic, 2, 1, prefix="after")
            return all(c.count(2) for c in consumers) and poll(cluster) and all(
                findings(topic, group_id)[2].state == "gap" for group_id in group_ids)

        wait_until(both_read_and_committed, interval=0.5, what="both findings to turn gap")
    finally:
        for consumer in consumers:
            consumer.close()
    # The consumers committed their positions as they closed: a reset plans from what a poll stored.
    poll(cluster)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listener", ["ssl", "mtls", "scram"])
def test_a_secured_cluster_is_polled_reset_and_backfilled(
    secure_kafka, listener, unique, approver, backfill_settings, enqueued, job_files  # noqa: F811
):
    fields, secrets = listener_settings(secure_kafka, listener)
    cluster = register(approver, f"secure-{listener}-{unique}", fields, secrets)
    broker = Broker(secure_kafka.listeners.plaintext)
    topic, group_ids = f"secure-{listener}-{unique}", [f"bf-{unique}", f"rs-{unique}"]
    try:
        # 1. Polls through the secured listener see the topic, the groups and the loss.
        two_groups_missing_k(broker, cluster, topic, group_ids)
        cluster.refresh_from_db()
        assert cluster.status == Cluster.Status.OK and topic in set(cluster.topics.values_list("name", flat=True))
        backfilled, reset = (findings(topic, group_id)[2] for group_id in group_ids)
        assert backfilled.missed_definite == K and reset.missed_definite == K

        # 2. A reset of the stopped group to earliest, through the secured listener.
        job = job_request(user=approver, finding_ids=[reset.id], kind="reset", params={"target": "earliest"})
        run_remediation_job(job.id)
        job = RemediationJob.objects.get(id=job.id)
        assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
        assert committed(broker, group_ids[1], topic)[2] == 0

        # 3. A Spark backfill (the Java client with the same TLS and SASL settings) delivers exactly its range.
        job = job_request(user=approver, finding_ids=[backfilled.id], kind="backfill", params={"sink": "parquet"})
        run_remediation_job(job.id)
        job = RemediationJob.objects.get(id=job.id)
        assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
        assert [(p["partition"], p["delivered"], p["unexplained"]) for p in job.result["partitions"]] == [
            (2, backfilled.backfill_end - backfilled.backfill_start, 0)]
        rows = pyarrow.dataset.dataset(Path(backfill_settings.BACKFILL_OUTPUT) / str(job.id),
                                       partitioning="hive").to_table(columns=["partition", "offset"]).to_pylist()
        assert sorted((row["partition"], row["offset"]) for row in rows) == [
            (2, offset) for offset in range(backfilled.backfill_start, backfilled.backfill_end)]

        # 4. No secret in the job's spec file, its log, its row, the audit trail or the cluster's state.
        assert job_files["specs"] and job_files["logs"]
        shown = [*job_files["specs"], *job_files["logs"], str(job.result), job.error,
                 *(str(event.detail) for event in AuditEvent.objects.all()),
                 cluster.last_error, cluster.ssl_key_pem_encrypted]
        # As stored, and as the job got them (the key opened, as PKCS#8).
        for secret in (*secrets.values(), *runner.job_secrets(cluster.client_config()).values):
            assert not any(secret in text for text in shown), "a secret was written down"
    finally:
        for future in broker.admin.delete_consumer_groups(group_ids, request_timeout=30).values():
            try:
                future.result(timeout=60)
            except Exception:  # noqa: BLE001 - best effort
                pass
        broker.close()


@pytest.mark.django_db
def test_a_wrong_ca_shows_as_a_certificate_error_in_words(secure_kafka, unique, approver):  # noqa: F811
    stranger = CertificateAuthority("not the brokers' CA")
    cluster = register(approver, f"wrong-ca-{unique}", {"bootstrap_servers": secure_kafka.listeners.ssl,
                                                        "security_protocol": "SSL",
                                                        "ssl_ca_pem": stranger.certificate_pem}, {})
    summary = poll_cluster(cluster_id=cluster.id)
    assert not summary.ok
    cluster.refresh_from_db()
    assert cluster.status == Cluster.Status.UNREACHABLE
    assert "certificate verify failed" in cluster.last_error, cluster.last_error

    answer = connection.run_connection_test(cluster.id)
    assert not answer["ok"] and "certificate verify failed" in answer["message"], answer["message"]
