"""Which certificates of a cluster's settings expire soon (groups.domain.tls):
each case with the reason its answer is right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from groups.domain.cluster_config import ClusterConfig
from groups.domain.tls import certificate_expiries, certificates_expiring, connection_problems
from tests.pki import CertificateAuthority

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
# A CA valid from NOW - 1 day to NOW + 30 days (tests/pki.py), and client certificates it signs.
CA = CertificateAuthority("Test CA", now=NOW)
SOON = CA.issue("soon", client=True, not_after=NOW + timedelta(days=3))
LATER = CA.issue("later", client=True, not_after=NOW + timedelta(days=90))


def test_it_lists_every_certificate_of_the_bundle_and_the_chain_soonest_first():
    found = certificate_expiries(ssl_ca_pem=CA.certificate_pem,
                                 ssl_certificate_pem=LATER.certificate_pem + SOON.certificate_pem)
    assert [(e.role, e.subject, e.not_after) for e in found] == [
        ("client", "CN=soon", NOW + timedelta(days=3)),
        ("ca", "CN=Test CA,O=Gapwatch tests", NOW + timedelta(days=30)),
        ("client", "CN=later", NOW + timedelta(days=90)),
    ]


@pytest.mark.parametrize(("within_days", "now", "expected", "why"), [
    (0, NOW, [], "nothing has expired yet, and no window asked for"),
    (3, NOW, ["CN=soon"], "expiring exactly at the window's end counts"),
    (2, NOW, [], "3 days away is outside a 2-day window"),
    (30, NOW, ["CN=soon", "CN=Test CA,O=Gapwatch tests"], "the CA expires in 30 days"),
    (0, NOW + timedelta(days=4), ["CN=soon"], "an expired certificate is always shown"),
])
def test_it_picks_those_expiring_within_the_window_or_expired(within_days, now, expected, why):
    found = certificate_expiries(ssl_ca_pem=CA.certificate_pem,
                                 ssl_certificate_pem=SOON.certificate_pem + LATER.certificate_pem)
    assert [e.subject for e in certificates_expiring(found, now=now, within_days=within_days)] == expected, why


def test_days_left_counts_whole_days_and_goes_negative_once_expired():
    (soon,) = certificate_expiries(ssl_ca_pem="", ssl_certificate_pem=SOON.certificate_pem)
    assert soon.days_left(NOW) == 3
    assert soon.days_left(NOW + timedelta(hours=1)) == 2, "2 days 23 hours left"
    assert soon.days_left(NOW + timedelta(days=4)) == -1


def test_unreadable_or_empty_pem_gives_nothing():
    assert certificate_expiries(ssl_ca_pem="not pem", ssl_certificate_pem="") == ()


def _without_subject(*, not_after: datetime) -> str:
    """A certificate with an empty subject (RFC 5280 allows it when the name is in a SAN), signed by CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(CA.issued.certificate.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=10)).not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("nameless.example")]), critical=True)
        .sign(CA.issued.key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def test_a_certificate_without_a_subject_is_named_as_such():
    # An empty name would leave the page's list and its message with nothing to point at.
    nameless = _without_subject(not_after=NOW + timedelta(days=2))
    assert [e.subject for e in certificate_expiries(ssl_ca_pem=nameless, ssl_certificate_pem="")] == ["(no subject)"]
    expired = _without_subject(not_after=NOW - timedelta(days=1))
    assert connection_problems(ClusterConfig("broker:9093", security_protocol="SSL", ssl_ca_pem=expired), now=NOW) == {
        "ssl_ca_pem": "The CA bundle certificate “(no subject)” expired on 2026-11-24 12:00 UTC."}
