"""ClusterConfig (groups.domain.cluster_config): librdkafka options, and a repr without the password."""

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
          "sasl.username": "gapwatch", "sasl.password": "s3cret"},
         "with a SASL mechanism the client gets the mechanism and the credentials"),
    ],
)
def test_it_gives_librdkafka_options(config, expected, why):
    assert config.client_config() == expected, why


def test_its_repr_never_shows_the_password():
    shown = repr(ClusterConfig("a:9092", "SASL_SSL", "PLAIN", "gapwatch", "s3cret"))
    assert "s3cret" not in shown
    assert shown == "ClusterConfig(bootstrap_servers='a:9092', security_protocol='SASL_SSL')"
