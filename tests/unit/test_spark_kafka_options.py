"""The Java client's options of a backfill (adapters.spark.reader.kafka_options),
how the secrets travel beside the spec (adapters.spark.spec.KafkaSecrets), and
the redaction rule that keeps them out of Spark's logs, UI and plans."""

from __future__ import annotations

import json
import re

import pytest

from groups.domain.cluster_config import ClusterConfig
from adapters.spark.reader import REDACTION_REGEX, SESSION_REDACTION, STRING_REDACTION_REGEX, kafka_options
from adapters.spark.spec import SECRETS_ENV, JobSpec, KafkaSecrets, KafkaSettings, SinkSpec, SpecError
from groups.domain.planning import BackfillRange
from tests.pki import CertificateAuthority

SECRETS = KafkaSecrets(sasl_password="pw", ssl_key_pem="KEY", ssl_key_password="KP", oauth_client_secret="CS")


@pytest.mark.parametrize(("settings", "expected", "why"), [
    (KafkaSettings("b:9092"), {"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "PLAINTEXT"},
     "PLAINTEXT: no TLS, no SASL"),
    (KafkaSettings("b:9093", "SSL", ssl_ca_pem="CA"),
     {"kafka.bootstrap.servers": "b:9093", "kafka.security.protocol": "SSL",
      "kafka.ssl.endpoint.identification.algorithm": "https", "kafka.ssl.truststore.type": "PEM",
      "kafka.ssl.truststore.certificates": "CA"},
     "a private CA as a PEM trust store given as text: no trust store file"),
    (KafkaSettings("b:9093", "SSL", ssl_certificate_pem="CERT", ssl_endpoint_identification=False),
     {"kafka.bootstrap.servers": "b:9093", "kafka.security.protocol": "SSL",
      "kafka.ssl.endpoint.identification.algorithm": "", "kafka.ssl.keystore.type": "PEM",
      "kafka.ssl.keystore.certificate.chain": "CERT", "kafka.ssl.keystore.key": "KEY",
      "kafka.ssl.key.password": "KP"},
     "mutual TLS: a PEM key store from the certificate and the secret key; the Java client says none with ''"),
    (KafkaSettings("b:9094", "SASL_SSL", "SCRAM-SHA-512", "gw"),
     {"kafka.bootstrap.servers": "b:9094", "kafka.security.protocol": "SASL_SSL",
      "kafka.ssl.endpoint.identification.algorithm": "https", "kafka.sasl.mechanism": "SCRAM-SHA-512",
      "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                'username="gw" password="pw";'},
     "SCRAM: JAAS from the stored password"),
    (KafkaSettings("b:9094", "SASL_SSL", "OAUTHBEARER", oauth_token_endpoint="https://idp/token",
                   oauth_client_id="gw", oauth_scope="kafka"),
     {"kafka.bootstrap.servers": "b:9094", "kafka.security.protocol": "SASL_SSL",
      "kafka.ssl.endpoint.identification.algorithm": "https", "kafka.sasl.mechanism": "OAUTHBEARER",
      "kafka.sasl.login.callback.handler.class":
          "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
      "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp/token",
      "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                                'clientId="gw" clientSecret="CS" scope="kafka";'},
     "OAUTHBEARER: Java's client-credentials login handler, the client in JAAS"),
])
def test_it_gives_the_java_client_the_same_settings(settings, expected, why):
    assert kafka_options(settings, SECRETS) == expected, why


def test_jaas_values_are_quoted():
    options = kafka_options(KafkaSettings("b:1", "SASL_SSL", "PLAIN", 'a"b'), KafkaSecrets(sasl_password='p\\"q'))
    assert options["kafka.sasl.jaas.config"].endswith('username="a\\"b" password="p\\\\\\"q";')


def test_every_option_holding_a_secret_is_redacted_by_spark():
    """Spark redacts an option whose name or value matches spark.redaction.regex."""
    pattern = re.compile(REDACTION_REGEX)
    ca = CertificateAuthority()
    client = ca.issue("gapwatch", client=True)
    for settings in (KafkaSettings("b:1", "SASL_SSL", "SCRAM-SHA-256", "gw", ssl_certificate_pem="CERT"),
                     KafkaSettings("b:1", "SASL_SSL", "OAUTHBEARER", oauth_client_id="gw")):
        secrets = KafkaSecrets(sasl_password="pw", ssl_key_pem=client.key_pem("kp"), ssl_key_password="kp",
                               oauth_client_secret="cs")
        for name, value in kafka_options(settings, secrets).items():
            holds_secret = any(secret in value for secret in secrets.values)
            if holds_secret:
                assert pattern.search(name) or pattern.search(value), name
    assert pattern.search(client.key_pem()), "an unencrypted PEM key is redacted wherever it shows"


def test_the_secrets_travel_in_the_environment_and_never_in_the_spec():
    ca = CertificateAuthority()
    client = ca.issue("gapwatch", client=True)
    config = ClusterConfig("b:9093", "SASL_SSL", "SCRAM-SHA-512", "gw", "sasl-pw", ssl_ca_pem=ca.certificate_pem,
                           ssl_certificate_pem=client.certificate_pem, ssl_key_pem=client.key_pem("kp-1", traditional=True),
                           ssl_key_password="kp-1", oauth_client_secret="client-secret-1")
    spec = JobSpec(job_id="1", attempt="a", kafka=KafkaSettings.of(config), ranges=(BackfillRange("t", 0, 0, 1),),
                   sink=SinkSpec("parquet", output="/o"), jars_dir="/j", progress_file="/p", result_file="/r")
    text = json.dumps(spec.to_json())
    secrets = KafkaSecrets.of(config)
    assert JobSpec.from_json(json.loads(text)) == spec
    assert ca.certificate_pem in text.replace("\\n", "\n"), "the CA is public: it is in the spec"
    for secret in (*config.secrets, *secrets.values):
        assert secret not in text
    assert secrets.ssl_key_pem.startswith("-----BEGIN PRIVATE KEY-----"), "PKCS#8 for the Java client"
    assert not secrets.ssl_key_password, "the key is opened: the Java client gets no password"
    environment = secrets.to_environment()
    assert list(environment) == [SECRETS_ENV]
    assert KafkaSecrets.from_environment(environment) == secrets
    assert "sasl-pw" not in repr(secrets) and "kp-1" not in repr(secrets)


def test_no_secret_no_environment_variable_and_a_bad_one_is_refused():
    assert KafkaSecrets().to_environment() == {}
    assert KafkaSecrets.from_environment({}) == KafkaSecrets()
    with pytest.raises(SpecError, match=SECRETS_ENV):
        KafkaSecrets.from_environment({SECRETS_ENV: json.dumps({"other": "x"})})


class RecordingReader:
    """Spark's session and DataFrameReader as far as read_ranges uses them:
    records the options it is given; ``load()`` answers them."""

    def __init__(self) -> None:
        self.recorded: dict[str, str] = {}

    @property
    def read(self):
        return self

    def format(self, name: str):
        assert name == "kafka"
        return self

    def option(self, key: str, value: str):
        self.recorded[key] = value
        return self

    def options(self, **values: str):
        self.recorded.update(values)
        return self

    def load(self) -> dict[str, str]:
        return self.recorded


@pytest.mark.parametrize(("timeout_ms", "request_ms"), [(120_000, 30_000), (10_000, 10_000)])
def test_the_kafka_source_gives_up_after_the_specs_timeout(timeout_ms, request_ms):
    from adapters.spark.reader import read_ranges

    spec = JobSpec(job_id="7", attempt="a1", kafka=KafkaSettings("b:9092"), ranges=(BackfillRange("t", 0, 0, 10),),
                   sink=SinkSpec("parquet", output="/tmp/out"), jars_dir="/jars", progress_file="/tmp/p.json",
                   result_file="/tmp/r.json", kafka_timeout_ms=timeout_ms)
    options = read_ranges(RecordingReader(), spec, {}, parallelism=2)
    assert (options["kafkaConsumer.pollTimeoutMs"], options["kafka.default.api.timeout.ms"],
            options["kafka.request.timeout.ms"]) == (str(timeout_ms), str(timeout_ms), str(request_ms))


def proto_text(options: dict[str, str]) -> str:
    """The options as a Spark Connect server prints a plan (protobuf text: quotes and backslashes escaped)."""
    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return "".join(f"options {{\n  key: {quoted(k)}\n  value: {quoted(v)}\n}}\n" for k, v in options.items())


def test_the_string_rule_redacts_each_secret_option_of_a_plan_printed_as_protobuf_text_and_nothing_else():
    """Spark Connect prints an operation's plan whole; spark.redaction.regex never looks at that text."""
    ca = CertificateAuthority()
    client = ca.issue("gapwatch", client=True)
    secrets = KafkaSecrets(sasl_password='p"w\\;}', ssl_key_pem=client.key_pem(), oauth_client_secret="cs-1")
    for settings in (KafkaSettings("b:1", "SASL_SSL", "SCRAM-SHA-512", "gw", ssl_ca_pem=ca.certificate_pem,
                                   ssl_certificate_pem=client.certificate_pem),
                     KafkaSettings("b:1", "SASL_SSL", "OAUTHBEARER", oauth_client_id="gw",
                                   oauth_token_endpoint="https://idp/token")):
        options = kafka_options(settings, secrets)
        text = proto_text(options)
        redacted = re.sub(STRING_REDACTION_REGEX, "*********(redacted)", text)
        for secret in (*secrets.values, *client.key_pem().splitlines()[1:-1]):
            assert secret not in redacted and secret.replace('"', '\\"') not in redacted
        # The options spark.redaction.regex names (the token endpoint's URL among them), no other.
        kept = [k for k in options if not re.search(REDACTION_REGEX, k)]
        assert kept and all(f'key: "{k}"' in redacted for k in kept), "only the options the key rule names go"
    assert re.search(STRING_REDACTION_REGEX, client.key_pem()), "a PEM key is redacted in any text"
    assert SESSION_REDACTION["spark.sql.redaction.string.regex"] == STRING_REDACTION_REGEX
    assert re.search(SESSION_REDACTION["spark.sql.redaction.options.regex"], "jdbc.url"), "Spark's default kept"
