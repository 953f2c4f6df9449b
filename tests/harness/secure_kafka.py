"""One secured KRaft broker for the tests of secured clusters, from the same
Kafka jars as every other broker here (``$GAPWATCH_HOME/lib/kafka``), with
the listeners users run, on free loopback ports:

- ``PLAINTEXT``: the test's own setup (topics, producers, consumers, ACLs);
  its principal ``User:ANONYMOUS`` is a super user (the controller's
  listener is PLAINTEXT too). So is any client of the ``SSL`` listener below,
  which authenticates the broker only: ACLs are exercised on the next two.
- ``SSL``: TLS with a private CA; the certificate names 127.0.0.1 and localhost.
- ``MTLS``: TLS with ``ssl.client.auth=required``; a client's principal is
  its certificate's subject, ``User:CN=<name>``.
- ``SASL_SSL``: SCRAM-SHA-512 over TLS; SCRAM users created with the admin API.
- ``OAUTH`` (with an ``OAuthIssuer``): ``SASL_SSL`` with OAUTHBEARER, tokens
  validated against the issuer's JWKS (a real OpenID provider:
  tests/harness/keycloak.py), its audience and issuer; a client's
  principal is the token's ``azp`` claim, ``User:<OAuth client id>``.

``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: a
Gapwatch principal holds exactly the ACLs of its capabilities (``WATCH_ACLS``,
``RESET_ACLS``, ``BACKFILL_ACLS``; all: ``GAPWATCH_ACLS``), granted by ``grant``.
One broker process for all of it (this machine has two cores).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.harness.class_archives import java_options
from tests.harness.processes import _die_with_parent, free_ports, random_cluster_id
from tests.harness.kafka_clients import wait_until
from tests.harness.keycloak import AUDIENCE, Keycloak
from tests.pki import CertificateAuthority, Issued

ROOT = Path(__file__).resolve().parents[2]
GAPWATCH_HOME = Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch"))
HEAP = "384m"

# What a Gapwatch principal needs, by capability (docs/security.md, "ACLs", has
# the same table; test_least_privilege checks each set
# alone and each ACL of the watch set removed):
WATCH_ACLS = (
    (ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),  # every group listed, not only the permitted
    (ResourceType.TOPIC, "*", AclOperation.DESCRIBE),  # metadata, topic ids, ListOffsets (watermarks, time index)
    (ResourceType.TOPIC, "*", AclOperation.DESCRIBE_CONFIGS),  # message.timestamp.type: a finding's likely start
    (ResourceType.GROUP, "*", AclOperation.DESCRIBE),  # DescribeGroups, OffsetFetch (committed offsets)
    (ResourceType.GROUP, "*", AclOperation.DESCRIBE_CONFIGS),  # a share group's share.auto.offset.reset
)
RESET_ACLS = (
    (ResourceType.GROUP, "*", AclOperation.READ),  # OffsetCommit (admin AlterConsumerGroupOffsets): the group
    (ResourceType.TOPIC, "*", AclOperation.READ),  # ... and each topic committed on
)
BACKFILL_ACLS = (
    (ResourceType.TOPIC, "*", AclOperation.READ),  # Spark's reader fetches (assign: it joins no group, commits nothing)
)
GAPWATCH_ACLS = tuple(dict.fromkeys(WATCH_ACLS + RESET_ACLS + BACKFILL_ACLS))


def acl(principal: str, kind: ResourceType, name: str, operation: AclOperation,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    """One literal ACL of ``principal`` (``User:...``), from any host."""
    return AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", operation, permission)


@dataclass(frozen=True)
class Listeners:
    plaintext: str
    ssl: str
    mtls: str
    sasl_ssl: str
    oauth: str


@dataclass(frozen=True)
class OAuthIssuer:
    """What the broker checks a token against."""

    issuer: str
    jwks_url: str
    audience: str


class SecureKafka:
    """Start with ``start()``, stop with ``close()`` (kills the broker, removes its files)."""

    def __init__(self, workdir: Path | None = None, *, oauth: OAuthIssuer | None = None) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gapwatch-secure-kafka-"))
        self.libs = GAPWATCH_HOME / "lib" / "kafka"
        assert self.libs.is_dir(), f"Kafka jars missing in {self.libs} (run scripts/setup.sh)"
        plaintext, ssl, mtls, sasl_ssl, oauth_port, self.controller_port = free_ports(6)
        self.oauth = oauth
        self.listeners = Listeners(*(f"127.0.0.1:{port}" for port in (plaintext, ssl, mtls, sasl_ssl, oauth_port)))
        self.ca = CertificateAuthority("Gapwatch secure-kafka test CA")
        self.broker_certificate = self.ca.issue("broker", hosts=("127.0.0.1", "localhost"))
        self.process: subprocess.Popen | None = None
        self.admin: AdminClient | None = None
        self.scram_password = ""
        self.oauth_client_secret = ""
        self.keycloak: Keycloak | None = None

    def client(self, name: str) -> Issued:
        """A client certificate this broker trusts; its principal is ``User:CN=<name>``."""
        return self.ca.issue(name, client=True)

    def _java(self, *args: str) -> list[str]:
        # Kafka 4 fetches no OAuth URL that this system property does not list.
        allowed = [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.oauth.jwks_url}"] if self.oauth else []
        return ["java", *java_options("broker", self.libs), "-Xms64m", f"-Xmx{HEAP}", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", *allowed,
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}", "-cp", f"{self.libs}/*", *args]

    def _write_files(self) -> Path:
        (self.workdir / "ca.pem").write_text(self.ca.certificate_pem)
        # A PEM key store file: the broker's private key (PKCS#8) and its certificate.
        (self.workdir / "broker.pem").write_text(self.broker_certificate.key_pem()
                                                 + self.broker_certificate.certificate_pem)
        os.chmod(self.workdir / "broker.pem", 0o600)
        (self.workdir / "log4j2.properties").write_text(
            "status = warn\nappender.file.type = File\nappender.file.name = file\n"
            f"appender.file.fileName = {self.workdir}/kafka.log\n"
            "appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.file.ref = file\n"
        )
        port = {name: address.rsplit(":", 1)[1] for name, address in vars(self.listeners).items()}
        names = ["PLAINTEXT", "SSL", "MTLS", "SASL_SSL", *(["OAUTH"] if self.oauth else [])]
        served = ",".join(f"{name}://127.0.0.1:{port[name.lower()]}" for name in names)
        config = self.workdir / "server.properties"
        config.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"listeners={served},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners={served}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,OAUTH:SASL_SSL,"
            "CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"log.dirs={self.workdir / 'data'}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.workdir / 'broker.pem'}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.workdir / 'ca.pem'}",
            "listener.name.mtls.ssl.client.auth=required",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            *self._oauth_config(),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found=false",
            "super.users=User:ANONYMOUS",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=2",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "",
        ]))
        return config

    def _oauth_config(self) -> list[str]:
        """The OAUTH listener: tokens checked against the issuer's keys (fetched
        from its JWKS), audience and issuer; the principal is the client id (``azp``)."""
        if self.oauth is None:
            return []
        prefix = "listener.name.oauth.oauthbearer."
        return [
            "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
            f"{prefix}sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            f"{prefix}sasl.server.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            f"sasl.oauthbearer.jwks.endpoint.url={self.oauth.jwks_url}",
            f"sasl.oauthbearer.expected.audience={self.oauth.audience}",
            f"sasl.oauthbearer.expected.issuer={self.oauth.issuer}",
            "sasl.oauthbearer.sub.claim.name=azp",
            # A session ends when its token expires: the client must log in again with a fresh
            # one (KIP-368), so a disabled client is refused at its token's expiry, not never.
            f"{prefix}connections.max.reauth.ms=3600000",
            # No grace after expiry (Kafka's default: 30 s), so that refusal comes at once.
            "sasl.oauthbearer.clock.skew.seconds=0",
        ]

    def start(self) -> SecureKafka:
        return self.format().launch()

    def format(self) -> SecureKafka:
        """Write the configuration and format the log directory (no OAuth issuer needed yet)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._config = self._write_files()
        subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", random_cluster_id(),
                                  "-c", str(self._config)),
                       check=True, capture_output=True, timeout=120)
        return self

    def launch(self) -> SecureKafka:
        """Start the formatted broker; with an OAuth issuer, it must serve its keys by now."""
        config = self._config
        log = open(self.workdir / "broker.out", "ab")  # noqa: SIM115 - owned by the process
        # SIGKILLed when the test process dies, even by an abort (see procs._die_with_parent).
        self.process = subprocess.Popen(self._java("kafka.Kafka", str(config)), stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
        self.admin = AdminClient({"bootstrap.servers": self.listeners.plaintext})
        wait_until(self._serving, timeout=120, what="the secured broker to serve metadata", retry_on=(Exception,))
        return self

    def _serving(self) -> bool:
        # A broker that exited (a port taken meanwhile, the issuer's keys not served) fails at once, saying why.
        if self.process.poll() is not None:
            pytest.fail(f"the secured broker exited ({self.process.returncode}):\n"
                        + (self.workdir / "broker.out").read_text(errors="replace")[-3000:])
        return bool(self.admin.list_topics(timeout=5).brokers)

    def add_scram_user(self, name: str, password: str) -> None:
        """A SCRAM-SHA-512 user of the SASL_SSL listener (principal ``User:<name>``)."""
        upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                              password.encode())
        for future in self.admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)

    def grant(self, principal: str, acls=GAPWATCH_ACLS) -> None:
        """``acls`` (resource type, name, operation) to ``principal`` (``User:...``), from any host."""
        self.add_acls([acl(principal, kind, name, operation) for kind, name, operation in acls])

    def add_acls(self, bindings: list[AclBinding]) -> None:
        for future in self.admin.create_acls(bindings).values():
            future.result(timeout=30)

    def delete_acls(self, bindings: list[AclBinding]) -> None:
        """Exactly these bindings (a binding is its own filter)."""
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in bindings]
        for future in self.admin.delete_acls(filters).values():
            future.result(timeout=30)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        shutil.rmtree(self.workdir, ignore_errors=True)


# The principals Gapwatch uses in the tests, with GAPWATCH_ACLS each.
SCRAM_USER = "gapwatch"
CLIENT_NAME = "gapwatch"
OAUTH_CLIENT = "gapwatch"


@pytest.fixture(scope="session")
def secure_kafka(keycloak):
    """One secured broker for the session, its OAuth issuer (``.keycloak``:
    the session's Keycloak, tests/integration/conftest.py), a SCRAM user, a
    client certificate name and an OAuth client (``.oauth_client_secret``)
    granted ``GAPWATCH_ACLS``; stopped at the end."""
    broker = None
    try:
        broker = SecureKafka(oauth=OAuthIssuer(issuer=keycloak.issuer, jwks_url=keycloak.jwks_url,
                                               audience=AUDIENCE))
        broker.format()
        broker.launch()
        broker.keycloak = keycloak
        broker.oauth_client_secret = keycloak.add_client(OAUTH_CLIENT)
        broker.scram_password = f"scram-{uuid.uuid4().hex}"
        broker.add_scram_user(SCRAM_USER, broker.scram_password)
        for principal in (f"User:{SCRAM_USER}", f"User:CN={CLIENT_NAME}", f"User:{OAUTH_CLIENT}"):
            broker.grant(principal)
        yield broker
    finally:
        if broker is not None:
            broker.close()


def replay_acls(replay: str, *, create: bool = True, write: bool = True) -> tuple:
    """What a backfill to the replay topic ``replay`` needs beyond ``BACKFILL_ACLS``
    (docs/security.md's ACL table): Create (when Gapwatch makes the topic) and Write; Describe
    and Read come with the watch and backfill sets' ``*``."""
    return (*([(ResourceType.TOPIC, replay, AclOperation.CREATE)] if create else []),
            *([(ResourceType.TOPIC, replay, AclOperation.WRITE)] if write else []))


def connect_through(cluster, kafka: SecureKafka, listener: str, *, user: str = SCRAM_USER, password: str = "",
                    client: Issued | None = None):
    """``cluster`` (a test scenario's row, made on the PLAINTEXT listener)
    connecting through a secured listener instead, trusting the test CA:
    ``scram`` (SCRAM-SHA-512 as ``user``; ``password`` defaults to the
    broker's ``scram_password``) or ``mtls`` (``client``'s certificate and its
    key, stored encrypted with a password). Saved; returns it."""
    cluster.security_protocol = "SASL_SSL" if listener == "scram" else "SSL"
    cluster.bootstrap_servers = kafka.listeners.sasl_ssl if listener == "scram" else kafka.listeners.mtls
    cluster.ssl_ca_pem = kafka.ca.certificate_pem
    if listener == "scram":
        cluster.sasl_mechanism, cluster.sasl_username = "SCRAM-SHA-512", user
        cluster.set_secret("sasl_password", password or kafka.scram_password)
    else:
        cluster.ssl_certificate_pem = client.certificate_pem
        cluster.set_secret("ssl_key_pem", client.key_pem("key-pass-never-shown"))
        cluster.set_secret("ssl_key_password", "key-pass-never-shown")
    cluster.save()
    return cluster


def secret_fragments(secrets) -> list[str]:
    """What to look for to find any of ``secrets`` written down: each
    one-line secret, and each line of a PEM key's body (a log may escape its
    line breaks, or cut it)."""
    fragments = []
    for secret in secrets:
        lines = [line for line in secret.splitlines() if line and not line.startswith("-----")]
        fragments += lines if len(lines) > 1 else [secret]
    return fragments


@pytest.fixture(scope="module")
def secure_broker():
    """A secured broker of the module's own without the OAuth listener (so
    without Keycloak: it starts in seconds), for modules that run beside
    another session server (a Spark cluster) on one xdist worker: the SCRAM
    user and the client certificate's principal hold ``GAPWATCH_ACLS``."""
    broker = SecureKafka()
    try:
        broker.start()
        broker.scram_password = f"scram-{uuid.uuid4().hex}"
        broker.add_scram_user(SCRAM_USER, broker.scram_password)
        for principal in (f"User:{SCRAM_USER}", f"User:CN={CLIENT_NAME}"):
            broker.grant(principal)
        yield broker
    finally:
        broker.close()
