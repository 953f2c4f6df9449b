"""A test's own public-key infrastructure, made with ``cryptography``: a CA,
certificates it signs (a broker's, with its host names; a client's), keys in
PEM (PKCS#8, optionally encrypted, or the traditional OpenSSL form). EC P-256
keys: as good as RSA to every client here, and made in a millisecond."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    """A certificate and its key; ``key_pem(password)`` encrypts with ``password`` (PKCS#8)."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def certificate_pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def key_pem(self, password: str = "", *, traditional: bool = False) -> str:
        protection = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        form = serialization.PrivateFormat.TraditionalOpenSSL if traditional else serialization.PrivateFormat.PKCS8
        return self.key.private_bytes(serialization.Encoding.PEM, form, protection).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Gapwatch tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority:
    def __init__(self, name: str = "Gapwatch test CA", *, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.now - timedelta(days=1)).not_valid_after(self.now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256())
        )
        self.issued = Issued(certificate, key)

    @property
    def certificate_pem(self) -> str:
        return self.issued.certificate_pem

    def issue(self, common_name: str, *, hosts: tuple[str, ...] = (), client: bool = False,
              not_before: datetime | None = None, not_after: datetime | None = None) -> Issued:
        """A leaf certificate: for a server (``hosts`` as its SANs) or a client (its principal: CN=...)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.IPAddress(ipaddress.ip_address(h)) if h.replace(".", "").isdigit() else x509.DNSName(h)
                 for h in hosts]
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.issued.certificate.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or self.now - timedelta(days=1))
            .not_valid_after(not_after or self.now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                  else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return Issued(builder.sign(self.issued.key, hashes.SHA256()), key)
