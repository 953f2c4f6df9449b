"""The save-time rules of a cluster's connection settings
(groups.domain.tls.connection_problems), as a table: each case the settings,
the fields it must flag with their messages word for word (the page shows them
as they are), and why."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import serialization

from groups.domain.cluster_config import ClusterConfig, key_as_pkcs8
from groups.domain.tls import connection_problems
from tests.pki import CertificateAuthority

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CA = CertificateAuthority(now=NOW)
OTHER_CA = CertificateAuthority("another CA", now=NOW)
CLIENT = CA.issue("gapwatch", client=True)
OTHER_CLIENT = CA.issue("someone-else", client=True)
EXPIRED = CA.issue("gapwatch", client=True, not_before=NOW - timedelta(days=60), not_after=NOW - timedelta(days=1))
NOT_YET = CA.issue("gapwatch", client=True, not_before=NOW + timedelta(days=1))
EXPIRED_CA = CertificateAuthority("old CA", now=NOW - timedelta(days=90))

TLS = ClusterConfig("broker:9093", security_protocol="SSL", ssl_ca_pem=CA.certificate_pem)
MTLS = replace(TLS, ssl_certificate_pem=CLIENT.certificate_pem, ssl_key_pem=CLIENT.key_pem())
SCRAM = ClusterConfig("broker:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="gapwatch",
                           sasl_password="pw", ssl_ca_pem=CA.certificate_pem)
AT_NOW = CA.issue("gapwatch", client=True, not_after=NOW)
FROM_NOW = CA.issue("gapwatch", client=True, not_before=NOW)
ENDPOINT = "OAUTHBEARER needs the token endpoint's https:// (or http://) URL."
NOT_TLS = "Certificates and keys need security protocol SSL or SASL_SSL."


@dataclass(frozen=True)
class Around:
    """A message known by its beginning and end: the middle is the parser's own words."""

    start: str
    end: str


OAUTH = ClusterConfig("broker:9093", security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                           oauth_token_endpoint="https://idp.example/realms/kafka/protocol/openid-connect/token",
                           oauth_client_id="gapwatch", oauth_client_secret="s3cret")


CASES = [
    # (settings, {field: message}, why)
    (ClusterConfig("broker:9093"), {}, "PLAINTEXT needs nothing"),
    (ClusterConfig("broker:9093", security_protocol="SSL"), {}, "TLS without a CA bundle trusts the system's CAs"),
    (TLS, {}, "a private CA in date"),
    (replace(TLS, ssl_ca_pem=CA.certificate_pem + OTHER_CA.certificate_pem), {}, "a bundle of two CAs"),
    (MTLS, {}, "a client certificate with its key"),
    (replace(MTLS, ssl_key_pem=CLIENT.key_pem(traditional=True)), {}, "a key in OpenSSL's traditional form"),
    (replace(MTLS, ssl_key_pem=CLIENT.key_pem("kp"), ssl_key_password="kp"), {}, "an encrypted key and its password"),
    (replace(MTLS, ssl_key_pem=CLIENT.key_pem("kp", traditional=True), ssl_key_password="kp"), {},
     "an encrypted traditional key and its password"),
    (replace(MTLS, ssl_certificate_pem=CLIENT.certificate_pem + CA.certificate_pem), {},
     "a client certificate followed by its chain: the key matches the first"),
    (replace(MTLS, ssl_certificate_pem=AT_NOW.certificate_pem, ssl_key_pem=AT_NOW.key_pem()), {},
     "a certificate is valid through its notAfter instant inclusive (RFC 5280, 4.1.2.5): not expired yet"),
    (replace(MTLS, ssl_certificate_pem=FROM_NOW.certificate_pem, ssl_key_pem=FROM_NOW.key_pem()), {},
     "and valid from its notBefore instant inclusive"),
    (SCRAM, {}, "SCRAM over TLS with a user and a password"),
    (OAUTH, {}, "OAUTHBEARER needs no SASL user or password, only its client"),
    (replace(OAUTH, oauth_token_endpoint="http://idp.internal:8080/token"), {}, "a plain http endpoint is allowed"),
    # malformed, expired, mismatched
    (replace(TLS, ssl_ca_pem="not a certificate"), {"ssl_ca_pem": "The CA bundle is not PEM: no “-----BEGIN CERTIFICATE-----” block."}, "no PEM block at all"),
    (replace(TLS, ssl_ca_pem="-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
     {"ssl_ca_pem": Around("The CA bundle could not be read as PEM certificates (", ").")}, "a PEM block that is not a certificate"),
    (replace(TLS, ssl_ca_pem=EXPIRED_CA.certificate_pem), {"ssl_ca_pem": "The CA bundle certificate “CN=old CA,O=Gapwatch tests” expired on 2026-04-02 12:00 UTC."}, "the CA expired"),
    (replace(TLS, ssl_ca_pem=CA.certificate_pem + EXPIRED_CA.certificate_pem), 
     {"ssl_ca_pem": "The CA bundle certificate “CN=old CA,O=Gapwatch tests” expired on 2026-04-02 12:00 UTC."},
     "one expired CA in a bundle is named, with the instant it expired (it was made 90 days ago for 30 days)"),
    (replace(MTLS, ssl_certificate_pem=EXPIRED.certificate_pem, ssl_key_pem=EXPIRED.key_pem()),
     {"ssl_certificate_pem": "The client certificate “CN=gapwatch” expired on 2026-05-31 12:00 UTC."}, "the client certificate expired: the broker would refuse it"),
    (replace(MTLS, ssl_certificate_pem=NOT_YET.certificate_pem, ssl_key_pem=NOT_YET.key_pem()),
     {"ssl_certificate_pem": Around("The client certificate ",
                                    "“CN=gapwatch” is not valid before 2026-06-02 12:00 UTC.")}, "a certificate not valid yet"),
    (replace(MTLS, ssl_key_pem=OTHER_CLIENT.key_pem()), {"ssl_key_pem": "The client key does not match the client certificate."},
     "the key of another certificate"),
    (replace(MTLS, ssl_key_pem="-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
     {"ssl_key_pem": "The client key could not be read as a PEM private key."}, "a damaged key"),
    (replace(MTLS, ssl_key_pem=CLIENT.certificate_pem), {"ssl_key_pem": "The client key is not PEM: no “-----BEGIN … PRIVATE KEY-----” block."},
     "a certificate pasted where the key goes"),
    (replace(MTLS, ssl_key_pem=CLIENT.key_pem("kp"), ssl_key_password="wrong"), 
     {"ssl_key_password": "The client key's password is wrong (or the key is damaged)."},
     "a wrong key password"),
    (replace(MTLS, ssl_key_pem=CLIENT.key_pem("kp")), 
     {"ssl_key_password": "The client key is encrypted: enter its password."},
     "an encrypted key without its password"),
    (replace(MTLS, ssl_key_pem=""), 
     {"ssl_key_pem": "A client certificate needs its private key."}, "a certificate without its key"),
    (replace(TLS, ssl_key_pem=CLIENT.key_pem()), 
     {"ssl_certificate_pem": "A client key needs its client certificate."},
     "a key without its certificate"),
    (replace(MTLS, security_protocol="PLAINTEXT"),
     {name: NOT_TLS for name in ("ssl_ca_pem", "ssl_certificate_pem", "ssl_key_pem")},
     "certificates on a PLAINTEXT cluster would be silently unused"),
    # a mechanism without its credentials
    (replace(SCRAM, sasl_password=""), {"sasl_password": "SASL_SSL needs a password."}, "SCRAM without a password"),
    (replace(SCRAM, sasl_username=""), {"sasl_username": "SASL_SSL needs a SASL user."}, "SCRAM without a user"),
    (replace(SCRAM, sasl_mechanism=""), {"sasl_mechanism": "SASL_SSL needs a SASL mechanism."}, "SASL_SSL without a mechanism"),
    (replace(TLS, sasl_mechanism="PLAIN"), 
     {"sasl_mechanism": "A SASL mechanism needs security protocol SASL_PLAINTEXT or SASL_SSL."},
     "a mechanism on a protocol without SASL"),
    (replace(OAUTH, oauth_token_endpoint=""), {"oauth_token_endpoint": ENDPOINT}, "no token endpoint"),
    (replace(OAUTH, oauth_token_endpoint="ftp://idp.example/token"), {"oauth_token_endpoint": ENDPOINT},
     "a token endpoint that is not http(s)"),
    (replace(OAUTH, oauth_token_endpoint="https://"), {"oauth_token_endpoint": ENDPOINT}, "no host"),
    (replace(OAUTH, oauth_client_id=""), {"oauth_client_id": "OAUTHBEARER needs a client id."}, "no client id"),
    (replace(OAUTH, oauth_client_secret=""), {"oauth_client_secret": "OAUTHBEARER needs a client secret."}, "no client secret"),
]


@pytest.mark.parametrize(("settings", "expected", "why"), CASES, ids=[case[2] for case in CASES])
def test_it_flags_exactly_the_fields_that_cannot_work(settings, expected, why):
    problems = connection_problems(settings, now=NOW)
    assert set(problems) == set(expected), why
    for name, message in expected.items():
        if isinstance(message, Around):
            assert problems[name].startswith(message.start) and problems[name].endswith(message.end), (why, problems)
        else:
            assert problems[name] == message, why


def test_it_never_quotes_a_secret_in_a_problem():
    settings = replace(MTLS, ssl_key_pem=CLIENT.key_pem("kp-very-secret"), ssl_key_password="wrong-but-secret")
    problems = connection_problems(settings, now=NOW)
    assert problems and not any("secret" in problem for problem in problems.values())


@pytest.mark.parametrize("traditional", [False, True])
def test_the_java_client_gets_the_key_as_unencrypted_pkcs8(traditional):
    """Kafka's Java client 3.9 on Java 17 refuses a PBES2-encrypted PKCS#8 key (tried here)."""
    converted = key_as_pkcs8(CLIENT.key_pem("kp", traditional=traditional), "kp")
    assert converted.startswith("-----BEGIN PRIVATE KEY-----")
    key = serialization.load_pem_private_key(converted.encode(), None)
    assert key.private_numbers() == CLIENT.key.private_numbers()


def test_the_java_client_gets_an_unencrypted_key_whatever_password_is_stored():
    """A key saved unencrypted may still have a password stored beside it (an earlier key's): it is not used."""
    converted = key_as_pkcs8(CLIENT.key_pem(), "kp")
    assert serialization.load_pem_private_key(converted.encode(), None).private_numbers() == \
        CLIENT.key.private_numbers()
