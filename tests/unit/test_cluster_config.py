"""ClusterConfig (groups.domain.cluster_config): librdkafka options, and a repr without any secret."""

from __future__ import annotations

import pytest

from groups.domain.cluster_config import ClusterConfig


@pytest.mark.parametrize(
    ("config", "expected", "why"),
    [
        (ClusterConfig("a:9092"), {"bootstrap.servers": "a:9092", "security.protocol": "PLAINTEXT"},
         "without SASL only the servers and the protocol"),
        (ClusterConfig("a:9092,b:9092", "SASL_SSL", "SCRAM-SHA-512", "gapwatch", "s3cret"),
         {"bootstrap.servers": "a:9092,b:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
          "sasl.username": "gapwatch", "sasl.password": "s3cret", "ssl.endpoint.identification.algorithm": "https"},
         "with a SASL mechanism the client gets the mechanism and the credentials; TLS verifies host names"),
        (ClusterConfig("a:9093", "SSL", ssl_ca_pem="CA", ssl_endpoint_identification=False),
         {"bootstrap.servers": "a:9093", "security.protocol": "SSL", "ssl.ca.pem": "CA",
          "ssl.endpoint.identification.algorithm": "none"},
         "a private CA; host name verification turned off says none (librdkafka's default is https)"),
        (ClusterConfig("a:9093", "SSL", ssl_ca_pem="CA", ssl_certificate_pem="CERT", ssl_key_pem="KEY",
                       ssl_key_password="KP"),
         {"bootstrap.servers": "a:9093", "security.protocol": "SSL", "ssl.ca.pem": "CA",
          "ssl.certificate.pem": "CERT", "ssl.key.pem": "KEY", "ssl.key.password": "KP",
          "ssl.endpoint.identification.algorithm": "https"},
         "mutual TLS: the certificate, the key and its password, all as PEM text (nothing on disk)"),
        (ClusterConfig("a:9092", "PLAINTEXT", ssl_ca_pem="CA", ssl_key_pem="KEY"),
         {"bootstrap.servers": "a:9092", "security.protocol": "PLAINTEXT"},
         "TLS material is not given to a client that does not use TLS"),
        (ClusterConfig("a:9094", "SASL_SSL", "OAUTHBEARER", oauth_token_endpoint="https://idp/token",
                       oauth_client_id="gw", oauth_client_secret="cs", oauth_scope="kafka"),
         {"bootstrap.servers": "a:9094", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
          "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
          "sasl.oauthbearer.client.id": "gw", "sasl.oauthbearer.client.secret": "cs",
          "sasl.oauthbearer.scope": "kafka", "ssl.endpoint.identification.algorithm": "https"},
         "OAUTHBEARER: librdkafka's own OIDC client-credentials flow, no SASL user or password"),
        (ClusterConfig("a:9094", "SASL_PLAINTEXT", "OAUTHBEARER", oauth_token_endpoint="https://idp/token",
                       oauth_client_id="gw", oauth_client_secret="cs"),
         {"bootstrap.servers": "a:9094", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
          "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
          "sasl.oauthbearer.client.id": "gw", "sasl.oauthbearer.client.secret": "cs"},
         "without a scope none is asked for"),
    ],
)
def test_it_gives_librdkafka_options(config, expected, why):
    assert config.librdkafka_options() == expected, why


def test_its_repr_never_shows_a_secret():
    shown = repr(ClusterConfig("a:9092", "SASL_SSL", "PLAIN", "gapwatch", "s3cret", ssl_key_pem="KEY-PEM",
                               ssl_key_password="KEY-PW", oauth_client_secret="CLIENT-SECRET"))
    assert not any(secret in shown for secret in ("s3cret", "KEY-PEM", "KEY-PW", "CLIENT-SECRET"))
    assert shown == "ClusterConfig(bootstrap_servers='a:9092', security_protocol='SASL_SSL')"


def test_it_lists_every_secret_to_mask():
    config = ClusterConfig("a:9092", "SASL_SSL", "PLAIN", "gapwatch", "pw", ssl_certificate_pem="CERT",
                           ssl_key_pem="KEY", ssl_key_password="KP", oauth_client_secret="CS")
    assert set(config.secrets) == {"pw", "KEY", "KP", "CS"}, "the certificate is public; the rest is secret"
