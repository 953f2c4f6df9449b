"""Gapwatch against a secured broker (tests/harness/secure_kafka.py): one
scenario per listener — TLS with a private CA, mutual TLS with an encrypted
client key, SCRAM-SHA-512 over TLS, OAUTHBEARER over TLS with tokens from a
real OpenID provider (Keycloak, tests/harness/keycloak.py) — each registered through the cluster
form and service with its PEM and secrets, polled, with a real `latest`
consumer's loss on a new partition found, reset and backfilled by Spark
(a process of its own, local mode). The test's own setup (topics, producers,
consumers) uses the broker's PLAINTEXT listener; Gapwatch only the secured one.

Least privilege (``test_least_privilege``): one principal per capability
(watch, watch + reset, watch + backfill) holding exactly its documented ACLs,
and each ACL of the watch set taken away in turn (a DENY, or the ACL deleted):
the cluster page and the finding say which ACL is missing on which resource.
The replay-topic sink (``test_a_replay_topic_backfill_needs_create_and_write_on_it_and_says_so``):
Create and Write on the replay topic, each refused in words when missing.
Backfills on Spark Connect and the standalone cluster from a secured broker:
tests/faults/test_secured_spark_cluster.py.

One broker and one Keycloak for the whole module (session fixtures).
"""

from __future__ import annotations

from pathlib import Path

import html
import uuid

import pyarrow.dataset
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AclOperation, AclPermissionType, ResourceType

from groups.cluster_forms import ClusterForm
from groups.models import AuditEvent, Cluster, Finding, RemediationJob
from groups.services.clusters import cluster_create
from groups.services.remediation import job_request
from tasks import connection
from adapters.spark.spec import KafkaSecrets
from tasks.celery_tasks import run_remediation_job
from tasks.cluster_client import kafka_client
from tasks.polling import cluster_adapter, poll_cluster
from tests.harness.backfills import K as BACKFILL_K
from tests.harness.backfills import Scenario, replayed_rows, run_job
from tests.harness.processes import free_ports
from tests.harness.kafka_clients import Broker, GroupConsumer, ShareGroupConsumer, wait_until
from tests.harness.scenarios import committed, findings, poll, start_consuming_group
from tests.harness.pages import client_for
from tests.harness.secure_kafka import (  # noqa: F401 - secure_kafka is a fixture
    BACKFILL_ACLS,
    CLIENT_NAME,
    OAUTH_CLIENT,
    RESET_ACLS,
    SCRAM_USER,
    WATCH_ACLS,
    acl,
    connect_through,
    replay_acls,
    secure_kafka,
)
from tests.pki import CertificateAuthority

K = 20  # messages written to the new partition before the groups pick it up
# The refresh test's token lifetime: librdkafka fetches the next at about 80% of it,
# and a disabled client is refused once its last token expires.
TOKEN_SECONDS = 5


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
    if listener == "oauth":
        return oauth_settings(kafka, OAUTH_CLIENT, kafka.oauth_client_secret)
    return ({"bootstrap_servers": kafka.listeners.sasl_ssl, "security_protocol": "SASL_SSL", **tls,
             "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": SCRAM_USER},
            {"sasl_password": kafka.scram_password})


def oauth_settings(kafka, client_id: str, client_secret: str) -> tuple[dict, dict]:
    """OAUTHBEARER over TLS, a token from Keycloak's client-credentials flow."""
    return ({"bootstrap_servers": kafka.listeners.oauth, "security_protocol": "SASL_SSL",
             "ssl_ca_pem": kafka.ca.certificate_pem, "sasl_mechanism": "OAUTHBEARER",
             "oauth_token_endpoint": kafka.keycloak.token_endpoint, "oauth_client_id": client_id},
            {"oauth_client_secret": client_secret})


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

        wait_until(both_read_and_committed, interval=0.25, what="both findings to turn gap")
    finally:
        for consumer in consumers:
            consumer.close()
    # The consumers committed their positions as they closed: a reset plans from what a poll stored.
    poll(cluster)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listener", ["ssl", "mtls", "scram", "oauth", "oauth-on-connect"])
def test_a_secured_cluster_is_polled_reset_and_backfilled(
    secure_kafka, listener, unique, approver, backfill_settings, enqueued, job_files, request  # noqa: F811
):
    """Each listener; ``-on-connect``: the backfill runs on the session's Spark
    Connect server (the Java client's OIDC flow in the server's JVM), as `make up` runs it."""
    on_connect = listener.endswith("-on-connect")
    listener = listener.removesuffix("-on-connect")
    if on_connect:
        server = request.getfixturevalue("connect_server")
        backfill_settings.SPARK_CONNECT_URL, backfill_settings.SPARK_CONNECT_TOKEN = server.url, server.token
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
        # Latest only assumed: nothing definite; exactly K if the groups start at latest, as they do.
        assert (backfilled.missed_definite, backfilled.missed_definite_if_latest) == (0, K)
        assert (reset.missed_definite, reset.missed_definite_if_latest) == (0, K)

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
        assert [a["mode"] for a in job.result["attempts"]] == ["connect" if on_connect else "process"]
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
        for secret in (*secrets.values(), *KafkaSecrets.of(cluster.cluster_config()).values):
            assert not any(secret in text for text in shown), "a secret was written down"
    finally:
        for future in broker.admin.delete_consumer_groups(group_ids, request_timeout=30).values():
            try:
                future.result(timeout=60)
            except Exception:  # noqa: BLE001 - best effort
                pass
        broker.close()


@pytest.mark.django_db
def test_a_wrong_ca_shows_as_a_certificate_error_in_words(secure_kafka, unique, approver, settings):  # noqa: F811
    # A refused handshake is reported within milliseconds; each request then waits out its timeout.
    settings.KAFKA_TIMEOUT_SECONDS = 2
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


@pytest.mark.django_db
def test_with_its_broker_stopped_a_secured_cluster_shows_unreachable_with_the_reason_and_the_pages_work(
    secure_kafka, unique, approver, settings, client  # noqa: F811
):
    """A SCRAM-over-TLS cluster whose broker does not answer (its port closed,
    as a stopped broker leaves it): the poll fails in words, and every page
    still renders from stored state, the clusters page with the reason."""
    settings.KAFKA_TIMEOUT_SECONDS = 2
    (port,) = free_ports(1)
    fields, secrets = listener_settings(secure_kafka, "scram")
    cluster = register(approver, f"stopped-{unique}", {**fields, "bootstrap_servers": f"127.0.0.1:{port}"}, secrets)
    assert not poll_cluster(cluster_id=cluster.id).ok
    cluster.refresh_from_db()
    assert cluster.status == Cluster.Status.UNREACHABLE and cluster.last_error, cluster.last_error
    client.force_login(approver)
    for path in ("/", "/?view=partitions", "/groups/", "/topics/", "/jobs/", "/audit/"):
        assert client.get(path).status_code == 200, path
    page = client.get("/clusters/").content.decode()
    assert shown(cluster.last_error) in page or cluster.last_error in page
    assert secrets["sasl_password"] not in page + cluster.last_error


def scram_cluster(kafka, user, name: str, acls) -> Cluster:
    """A cluster on the SCRAM listener as a new SCRAM user holding exactly ``acls``."""
    password = f"pw-{uuid.uuid4().hex}"
    principal = f"{name}-{uuid.uuid4().hex[:6]}"
    kafka.add_scram_user(principal, password)
    kafka.grant(f"User:{principal}", acls)
    cluster = register(user, name, {"bootstrap_servers": kafka.listeners.sasl_ssl, "security_protocol": "SASL_SSL",
                                    "ssl_ca_pem": kafka.ca.certificate_pem, "sasl_mechanism": "SCRAM-SHA-512",
                                    "sasl_username": principal}, {"sasl_password": password})
    cluster.principal = f"User:{principal}"
    return cluster


def commit(broker: Broker, group_id: str, topic: str, offsets: dict[int, int]) -> None:
    """A commit of an Empty group, as its consumers' last commits would leave it."""
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p, o) for p, o in offsets.items()])
    broker.admin.alter_consumer_group_offsets([request])[group_id].result(timeout=30)


def refused_poll(cluster: Cluster) -> str:
    """The cluster's error after a poll that the broker's ACLs made fail (waits
    for the ACL change to reach the authorizer)."""
    wait_until(lambda: not poll_cluster(cluster_id=cluster.id).ok, interval=0.25, what="the poll to be refused")
    cluster.refresh_from_db()
    assert cluster.status == Cluster.Status.UNREACHABLE
    return cluster.last_error


def shown(text: str) -> str:
    """``text`` as a page renders it (quotes escaped)."""
    return html.escape(text)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_least_privilege(secure_kafka, unique, approver, backfill_settings, enqueued, job_files):  # noqa: F811
    """1. Three clusters on one SCRAM listener, one principal each: watch only;
       watch + reset; watch + backfill. Each polls the same topic and group
       and finds the same gap (an Empty group whose first commit on a new
       partition is at its end).
    2. The watch-only principal cannot reset or backfill: both jobs fail at
       once, and the finding's page says "missing ACL: Read on group ..." and
       "... Read on topic ...".
    3. The reset principal resets, the backfill principal backfills exactly
       (so Spark's reader needs no group ACL).
    4. Each ACL of the watch set taken away from the watch principal makes
       its poll fail in words on the clusters page, and nothing is read as
       gone; given back, the poll works again."""
    kafka, broker = secure_kafka, Broker(secure_kafka.listeners.plaintext)
    topic, group_id = f"lp-{unique}", f"lp-{unique}-g"
    watch = scram_cluster(kafka, approver, f"lp-watch-{unique}", WATCH_ACLS)
    reset = scram_cluster(kafka, approver, f"lp-reset-{unique}", WATCH_ACLS + RESET_ACLS)
    backfill = scram_cluster(kafka, approver, f"lp-backfill-{unique}", WATCH_ACLS + BACKFILL_ACLS)
    clusters = (watch, reset, backfill)
    page = client_for(approver)
    try:
        # 1. The same gap, seen by each principal.
        broker.create_topic(topic, 2)
        commit(broker, group_id, topic, {0: 0, 1: 0})
        for cluster in clusters:
            poll(cluster)
        broker.raise_partitions(topic, 3)
        broker.produce(topic, 2, K)
        for cluster in clusters:
            poll(cluster)
        commit(broker, group_id, topic, {2: K})
        found = {}
        for cluster in clusters:
            poll(cluster)
            found[cluster.name] = Finding.objects.get(cluster=cluster, topic__name=topic, group__group_id=group_id,
                                                      partition=2)
            assert (found[cluster.name].state, found[cluster.name].missed_definite_if_latest) == ("gap", K)

        # 2. Watching does not allow repairing: refused at once, in words, on the finding's page.
        watched = found[watch.name]
        for kind, params, words in (
            ("reset", {"target": "earliest"}, f"missing ACL: Read on group {group_id!r}"),
            ("backfill", {"sink": "parquet"}, f"missing ACL: Read on topic {topic!r}"),
        ):
            job = job_request(user=approver, finding_ids=[watched.id], kind=kind, params=params)
            run_remediation_job(job.id)
            job.refresh_from_db()
            assert job.status == RemediationJob.Status.FAILED and words in job.error, (job.status, job.error)
            assert shown(words) in page.get(f"/findings/{watched.id}/").content.decode()
        assert committed(broker, group_id, topic)[2] == K, "the refused reset committed nothing"
        assert not job_files["specs"], "a backfill its principal may not read never starts Spark"

        # 3. Each repair with exactly its capability's ACLs.
        repairs = found[backfill.name]
        job = job_request(user=approver, finding_ids=[repairs.id], kind="backfill", params={"sink": "parquet"})
        run_remediation_job(job.id)
        job.refresh_from_db()
        assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
        assert [(p["partition"], p["delivered"], p["unexplained"]) for p in job.result["partitions"]] == [(2, K, 0)]
        job = job_request(user=approver, finding_ids=[found[reset.name].id], kind="reset",
                          params={"target": "earliest"})
        run_remediation_job(job.id)
        job.refresh_from_db()
        assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
        assert committed(broker, group_id, topic)[2] == 0

        # 4. Each ACL of the watch set taken away: the broker would mostly say nothing (a smaller cluster).
        # A share group too, whose share.auto.offset.reset the poll reads (DescribeConfigs on the group).
        share_id = f"lp-{unique}-share"
        sharing = ShareGroupConsumer(broker.bootstrap, share_id, topic)
        wait_until(lambda: poll(watch) and watch.groups.filter(group_id=share_id, type="share").exists(),
                   interval=0.5, what="the watch principal's poll to list the share group")
        principal = watch.principal
        deny_group = acl(principal, ResourceType.GROUP, group_id, AclOperation.DESCRIBE, AclPermissionType.DENY)
        deny_share_config = acl(principal, ResourceType.GROUP, share_id, AclOperation.DESCRIBE_CONFIGS,
                                AclPermissionType.DENY)
        deny_topic = acl(principal, ResourceType.TOPIC, topic, AclOperation.DESCRIBE, AclPermissionType.DENY)
        cluster_describe = acl(principal, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
        for added, deleted, words in (
            # The group is listed (Describe on the cluster); describing it is refused.
            ([deny_group], [], f"missing ACL: Describe on group {group_id!r}"),
            # The topic is left out of the listing; described by name, as earlier polls saw it, it is refused.
            ([deny_topic], [], f"missing ACL: Describe on topic {topic!r}"),
            # Without Describe on the cluster, groups without an ACL would be left out of the listing silently.
            ([], [cluster_describe], "missing ACL: Describe on the cluster"),
            # The share group is listed and described; its config is refused.
            ([deny_share_config], [], f"missing ACL: DescribeConfigs on group {share_id!r}"),
        ):
            kafka.add_acls(added) if added else kafka.delete_acls(deleted)
            try:
                error = refused_poll(watch)
                assert words in error, error
                assert shown(words) in page.get("/clusters/").content.decode()
                assert Finding.objects.filter(id=watched.id, closed_at__isnull=True).exists(), "read as gone"
            finally:
                kafka.delete_acls(added) if added else kafka.add_acls(deleted)
            wait_until(lambda: poll_cluster(cluster_id=watch.id).ok, interval=0.25, what="the poll to work again")
        sharing.close()
    finally:
        broker.close()


@pytest.mark.django_db
def test_an_oauth_token_is_refreshed_before_it_expires_and_a_disabled_client_is_an_authentication_error(
    secure_kafka, unique, approver, settings  # noqa: F811
):
    """1. A client whose tokens live TOKEN_SECONDS: the poller's one librdkafka client
       (``sasl.oauthbearer.method=oidc``) fetches a new token before each
       expires, and its polls keep working on the broker, which ends each
       session when its token expires.
    2. The client disabled in Keycloak (revoked): the next token is refused,
       the poll fails with an authentication error in words, and nothing
       stored is read as gone; the connection test says the same."""
    # A refused token leaves requests waiting out their timeout (the connection test's, the failing poll's).
    settings.KAFKA_TIMEOUT_SECONDS = 4
    kafka, broker = secure_kafka, Broker(secure_kafka.listeners.plaintext)
    client_id, topic = f"refresh-{unique}", f"oauth-{unique}"
    secret = kafka.keycloak.add_client(client_id, token_seconds=TOKEN_SECONDS)
    kafka.grant(f"User:{client_id}", WATCH_ACLS)
    fields, secrets = oauth_settings(kafka, client_id, secret)
    cluster = register(approver, f"oauth-refresh-{unique}", fields, secrets)
    try:
        broker.create_topic(topic, 1)
        poll(cluster)
        with cluster_adapter(cluster) as adapter:
            # 1. Three tokens, each fetched before the one before it expired, one client all along.
            wait_until(lambda: poll(cluster) and len(kafka.keycloak.client_logins(client_id)) >= 3, timeout=60,
                       interval=0.25, what="the client's token to be refreshed twice")
            issued = kafka.keycloak.client_logins(client_id)
            assert all(later - earlier < TOKEN_SECONDS * 1000 for earlier, later in zip(issued, issued[1:])), issued
            with cluster_adapter(cluster) as polled_with:
                assert polled_with is adapter, "the same client refreshed its token"

        # 2. Revoked: an authentication error, not an empty cluster.
        kafka.keycloak.set_client_enabled(client_id, False)
        wait_until(lambda: not poll_cluster(cluster_id=cluster.id).ok, timeout=60, interval=0.25,
                   what="the disabled client's poll to fail")
        cluster.refresh_from_db()
        assert cluster.status == Cluster.Status.UNREACHABLE
        # Whichever client logs in again first says it: librdkafka ("authentication failed") or the
        # share-group reader's Java client, whose token is refused the same way.
        assert "login refused" in cluster.last_error and (
            "authentication failed" in cluster.last_error or "a disabled OAuth client" in cluster.last_error), (
            cluster.last_error)
        assert cluster.topics.filter(name=topic, deleted=False).exists(), "a refused login read as an empty cluster"
        answer = connection.run_connection_test(cluster.id)
        assert not answer["ok"] and "Failed to acquire SASL OAUTHBEARER token" in answer["message"], answer["message"]
        assert "revoked OAuth client" in answer["message"], answer["message"]
        assert secret not in cluster.last_error + answer["message"]
    finally:
        broker.close()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_replay_topic_backfill_needs_create_and_write_on_it_and_says_so(
    secure_kafka, unique, approver, backfill_settings, enqueued, job_files  # noqa: F811
):
    """The kafka sink on the SCRAM listener, as a principal holding the watch
    and backfill ACLs, then the replay topic's (docs/security.md's ACL table):

    1. Without Create on the replay topic: the job fails before Spark starts,
       naming the ACL, and no topic is made.
    2. With Create, without Write: the topic is made, the job fails before
       Spark starts naming Write, and the topic holds nothing.
    3. With Write: exactly the range is replayed."""
    kafka, broker = secure_kafka, Broker(secure_kafka.listeners.plaintext)
    principal, password = f"replay-{unique}", f"pw-{uuid.uuid4().hex}"
    kafka.add_scram_user(principal, password)
    kafka.grant(f"User:{principal}", WATCH_ACLS + BACKFILL_ACLS)
    try:
        scenario = Scenario(broker, f"replay-acl-{unique}", f"replay-acl-{unique}", BACKFILL_K, sink="kafka")
        cluster = connect_through(scenario.cluster, kafka, "scram", user=principal, password=password)
        replay = scenario.replay_topic()

        for grant, words in ((replay_acls(replay, create=False, write=False), f"missing ACL: Create on topic {replay!r}"),
                             (replay_acls(replay, write=False), f"missing ACL: Write on topic {replay!r}")):
            if grant:
                kafka.grant(f"User:{principal}", grant)
            job = run_job(scenario.request_job(approver, "kafka").id)
            assert job.status == RemediationJob.Status.FAILED and words in job.error, (job.status, job.error)
            assert not job_files["specs"], "refused before Spark started"
            if "Create" in words:
                assert replay not in broker.admin.list_topics(timeout=10).topics
            else:
                assert replayed_rows(broker, scenario.topic, replay) == [], "nothing replayed"

        kafka.grant(f"User:{principal}", replay_acls(replay))
        adapter = kafka_client(cluster.cluster_config())
        wait_until(lambda: adapter.describe_topic(replay).may_write, what="the Write ACL to apply")
        job = run_job(scenario.request_job(approver, "kafka").id)
        assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
        assert sorted(replayed_rows(broker, scenario.topic, replay)) == scenario.expected_rows()
    finally:
        broker.close()


@pytest.mark.django_db(transaction=True)
def test_an_expansion_plan_without_alter_on_the_topic_shows_the_brokers_refusal_and_changes_nothing(
    secure_kafka, unique, approver,  # noqa: F811
):
    """Issue 33: the plan asks the broker (CreatePartitions, validate_only) as
    the cluster's principal. Without Alter on the topic the broker refuses,
    the plan says which ACL is missing, and the topic keeps its partitions;
    given Alter, the same plan is accepted, and still nothing changes."""
    from tasks.expansion.verdict import partitions_verdict

    kafka, broker = secure_kafka, Broker(secure_kafka.listeners.plaintext)
    topic = f"exp-acl-{unique}"
    cluster = scram_cluster(kafka, approver, f"exp-acl-{unique}", WATCH_ACLS)
    try:
        broker.create_topic(topic, 2)
        verdict = partitions_verdict(cluster=cluster, topic=topic, count=4)
        assert (verdict.accepted, verdict.asked) == (False, True)
        assert verdict.reason.startswith("TOPIC_AUTHORIZATION_FAILED") and "Alter on topic" in verdict.reason, \
            verdict.reason
        kafka.grant(cluster.principal, ((ResourceType.TOPIC, topic, AclOperation.ALTER),))
        wait_until(lambda: partitions_verdict(cluster=cluster, topic=topic, count=4).accepted, interval=0.25,
                   what="the broker to accept the plan once Alter is granted")
        assert len(broker.admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    finally:
        broker.close()


@pytest.mark.django_db(transaction=True)
def test_protection_by_membership_without_read_on_the_group_is_refused_in_words(
    secure_kafka, unique, approver,  # noqa: F811
):
    """Issue 43: Gapwatch's seat in a live group needs Read on the group (JoinGroup, OffsetCommit).
    Without it the seat is refused, the words name the ACL, and the group is not touched; given it,
    the same seat is taken and its commit lands."""
    from groups.domain.membership import protector_client_id
    from adapters.kafka import Membership, SeatRequest

    kafka, broker = secure_kafka, Broker(secure_kafka.listeners.plaintext)
    topic, group_id, anchor = f"seat-acl-{unique}", f"seat-acl-{unique}", f"anchor-{unique}"
    cluster = scram_cluster(kafka, approver, f"seat-acl-{unique}",
                            WATCH_ACLS + ((ResourceType.TOPIC, "*", AclOperation.READ),))
    member = None
    try:
        broker.create_topic(topic, 2)
        broker.create_topic(anchor, 1)
        member = GroupConsumer(kafka.listeners.plaintext, group_id, topic, offset_reset="latest")
        wait_until(lambda: broker.produce(topic, 0, 1) or member.count(0) > 0, interval=0.5,
                   what="the group reading")

        def seat() -> dict:
            with Membership(cluster.cluster_config(), client_id=protector_client_id(what=f"acl-{unique}"),
                            anchor_topic=anchor, timeout=10) as seats:
                refused = seats.join([SeatRequest(group_id, "classic", "range")], within=20)
                if not refused:
                    refused = {group_id: seats.commit(group_id, {(topic, 0): 0}, within=10)}
            return refused
        refused = seat()
        assert "missing ACL: Read on the group" in refused[group_id], refused
        before = member.count(0)
        wait_until(lambda: broker.produce(topic, 0, 1) or member.count(0) > before, interval=0.5,
                   what="the group still reading: it was not touched")

        kafka.grant(cluster.principal, ((ResourceType.GROUP, group_id, AclOperation.READ),))
        wait_until(lambda: seat() == {group_id: ""}, timeout=60, interval=1,
                   what="the seat taken and its commit landed once Read on the group is granted")
    finally:
        if member is not None:
            member.close()
        broker.close()
