"""Which certificates of a cluster's settings expire soon (groups.domain.tls):
each case with the reason its answer is right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from groups.domain.tls import certificate_expiries, certificates_expiring
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
