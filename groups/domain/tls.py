"""What a cluster's connection settings must satisfy before they are saved:
each rule a small function that returns a problem in words (or None), over
plain values, with ``now`` passed in. PEM is parsed with ``cryptography``;
nothing here reads a file or the network.

The settings are a ``ClusterConfig`` (``groups.domain.cluster_config``, which
also owns the protocol constants and the Java client's key conversion), as
they will be stored: a secret not replaced is the stored one (the service
decrypts it to check it, never to show it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlparse

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from groups.domain.cluster_config import (
    OAUTHBEARER,
    PASSWORD_MECHANISMS,
    SASL_PROTOCOLS,
    TLS_PROTOCOLS,
    ClusterConfig,
    is_encrypted_key,
)


def connection_problems(settings: ClusterConfig, *, now: datetime) -> dict[str, str]:
    """``{field name: problem}`` for every rule the settings break; empty when
    they can be saved. One problem per field (the first rule that fails)."""
    problems: dict[str, str] = {}
    for rule in (_sasl_problems, _oauth_problems, _tls_problems):
        for name, problem in rule(settings, now).items():
            problems.setdefault(name, problem)
    return problems


# --- SASL ------------------------------------------------------------------------------


def _sasl_problems(s: ClusterConfig, now: datetime) -> dict[str, str]:
    protocol, mechanism = s.security_protocol, s.sasl_mechanism
    if protocol not in SASL_PROTOCOLS:
        return {"sasl_mechanism": "A SASL mechanism needs security protocol SASL_PLAINTEXT or SASL_SSL."} \
            if mechanism else {}
    if mechanism == OAUTHBEARER:
        return {}
    problems = {"sasl_mechanism": f"{protocol} needs a SASL mechanism."} if not mechanism else {}
    if not s.sasl_username:
        problems["sasl_username"] = f"{protocol} needs a SASL user."
    if not s.sasl_password:
        problems["sasl_password"] = f"{protocol} needs a password."
    return problems


def _oauth_problems(s: ClusterConfig, now: datetime) -> dict[str, str]:
    if s.sasl_mechanism != OAUTHBEARER or s.security_protocol not in SASL_PROTOCOLS:
        return {}
    problems = {}
    endpoint = urlparse(s.oauth_token_endpoint)
    if endpoint.scheme not in ("https", "http") or not endpoint.hostname:
        problems["oauth_token_endpoint"] = "OAUTHBEARER needs the token endpoint's https:// (or http://) URL."
    if not s.oauth_client_id:
        problems["oauth_client_id"] = "OAUTHBEARER needs a client id."
    if not s.oauth_client_secret:
        problems["oauth_client_secret"] = "OAUTHBEARER needs a client secret."
    return problems


# --- TLS -------------------------------------------------------------------------------


def _tls_problems(s: ClusterConfig, now: datetime) -> dict[str, str]:
    """The CA bundle parses and is in date; a client certificate parses, is in
    date, comes with its key, and the key opens with its password and matches."""
    if s.security_protocol not in TLS_PROTOCOLS:
        given = [name for name in ("ssl_ca_pem", "ssl_certificate_pem", "ssl_key_pem") if getattr(s, name)]
        return {name: "Certificates and keys need security protocol SSL or SASL_SSL." for name in given}
    problems = {}
    if s.ssl_ca_pem:
        problem = _certificates_problem(s.ssl_ca_pem, "CA bundle", now)
        if problem:
            problems["ssl_ca_pem"] = problem
    if s.ssl_key_pem and not s.ssl_certificate_pem:
        problems["ssl_certificate_pem"] = "A client key needs its client certificate."
    if not s.ssl_certificate_pem:
        return problems
    problem = _certificates_problem(s.ssl_certificate_pem, "client certificate", now)
    if problem:
        problems["ssl_certificate_pem"] = problem
        return problems
    if not s.ssl_key_pem:
        problems["ssl_key_pem"] = "A client certificate needs its private key."
        return problems
    key, problem = _private_key(s.ssl_key_pem, s.ssl_key_password)
    if problem:
        problems["ssl_key_password" if "password" in problem else "ssl_key_pem"] = problem
        return problems
    leaf = x509.load_pem_x509_certificates(s.ssl_certificate_pem.encode())[0]
    if _public_der(leaf.public_key()) != _public_der(key.public_key()):
        problems["ssl_key_pem"] = "The client key does not match the client certificate."
    return problems


@dataclass(frozen=True)
class CertificateExpiry:
    """When one certificate of a cluster's settings stops being valid.
    ``role``: ``ca`` (the CA bundle) or ``client`` (the client chain)."""

    role: str
    subject: str
    not_after: datetime

    def days_left(self, now: datetime) -> int:
        """Whole days until expiry; negative once expired."""
        return (self.not_after - now) // timedelta(days=1)


def certificate_expiries(*, ssl_ca_pem: str, ssl_certificate_pem: str) -> tuple[CertificateExpiry, ...]:
    """Every certificate of the CA bundle and of the client chain, soonest
    expiry first. PEM that does not parse gives nothing here: saving it was
    refused (``connection_problems``)."""
    found = []
    for role, pem in (("ca", ssl_ca_pem), ("client", ssl_certificate_pem)):
        try:
            certificates = x509.load_pem_x509_certificates(pem.encode()) if pem.strip() else []
        except ValueError:
            certificates = []
        found += [CertificateExpiry(role=role, subject=c.subject.rfc4514_string() or "(no subject)",
                                    not_after=c.not_valid_after_utc) for c in certificates]
    return tuple(sorted(found, key=lambda expiry: (expiry.not_after, expiry.role, expiry.subject)))


def certificates_expiring(
    expiries: tuple[CertificateExpiry, ...], *, now: datetime, within_days: int,
) -> tuple[CertificateExpiry, ...]:
    """Those that expire within ``within_days`` of ``now``, or have expired."""
    return tuple(expiry for expiry in expiries if expiry.not_after <= now + timedelta(days=within_days))


def _certificates_problem(pem: str, what: str, now: datetime) -> str | None:
    """Parse every certificate of a PEM bundle; each must be valid at ``now``."""
    if "-----BEGIN CERTIFICATE-----" not in pem:
        return f"The {what} is not PEM: no “-----BEGIN CERTIFICATE-----” block."
    try:
        certificates = x509.load_pem_x509_certificates(pem.encode())
    except ValueError as error:
        return f"The {what} could not be read as PEM certificates ({error})."
    # "The CA bundle certificate …", but "The client certificate …", not "certificate certificate".
    one = what if what.endswith("certificate") else f"{what} certificate"
    for certificate in certificates:
        subject = certificate.subject.rfc4514_string() or "(no subject)"
        if certificate.not_valid_after_utc < now:
            return f"The {one} “{subject}” expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC."
        if certificate.not_valid_before_utc > now:
            return (f"The {one} “{subject}” is not valid before "
                    f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC.")
    return None


def _private_key(pem: str, password: str):
    """``(key, None)`` or ``(None, problem)``; a problem about the password says "password"."""
    if "PRIVATE KEY-----" not in pem:
        return None, "The client key is not PEM: no “-----BEGIN … PRIVATE KEY-----” block."
    encrypted = is_encrypted_key(pem)
    if encrypted and not password:
        return None, "The client key is encrypted: enter its password."
    try:
        key = serialization.load_pem_private_key(pem.encode(), password.encode() if encrypted else None)
    except ValueError:
        if encrypted:
            return None, "The client key's password is wrong (or the key is damaged)."
        return None, "The client key could not be read as a PEM private key."
    except (TypeError, UnsupportedAlgorithm) as error:
        return None, f"The client key could not be read ({error})."
    return key, None


def _public_der(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)



