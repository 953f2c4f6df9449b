"""How to reach a cluster: the client settings of one registered cluster,
and the one place that turns them into a client's options.

Plain data, so that loading the models or planning a job never loads a
Kafka client. ``ClusterConfig`` owns the fields, the protocol constants and
both mappings: ``librdkafka_options`` (librdkafka's names: the adapter,
``adapters.kafka``) and ``java_options`` (the Java client's: the poll's JVM,
``adapters.kafka.java_client``, and Spark's Kafka source and sink through it,
``adapters.spark.reader.kafka_options``). The rules a new cluster's settings
must keep are ``groups.domain.tls``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cryptography.hazmat.primitives import serialization

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
OAUTHBEARER = "OAUTHBEARER"
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The Java client's JAAS login module per SASL mechanism.
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    OAUTHBEARER: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
# The Java client's OIDC client-credentials flow (KIP-768).
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
ENCRYPTED_KEY_MARKERS = ("ENCRYPTED PRIVATE KEY", "Proc-Type: 4,ENCRYPTED")


def is_encrypted_key(pem: str) -> bool:
    return any(marker in pem for marker in ENCRYPTED_KEY_MARKERS)


def key_as_pkcs8(pem: str, password: str) -> str:
    """The key as unencrypted PKCS#8 PEM, the form the Java client reads
    (validated keys only). Kafka's Java client 3.9 on Java 17 refuses a
    PBES2 (AES) encrypted PKCS#8 key, the only encryption worth using, so
    the Java clients get the key opened; it travels as the password would
    (never written down, redacted by Spark)."""
    key = serialization.load_pem_private_key(pem.encode(), password.encode() if is_encrypted_key(pem) else None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _quoted(text: str) -> str:
    """A JAAS option value."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class ClusterConfig:
    """``ssl_*_pem``: PEM text (a CA bundle; the client certificate, leaf
    first; its private key). ``ssl_endpoint_identification``: check the
    broker's certificate names the host connected to. ``oauth_*``: the OIDC
    client-credentials flow of SASL/OAUTHBEARER."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_ca_pem: str = field(default="", repr=False)
    ssl_certificate_pem: str = field(default="", repr=False)
    ssl_key_pem: str = field(default="", repr=False)
    ssl_key_password: str = field(default="", repr=False)
    ssl_endpoint_identification: bool = True
    oauth_token_endpoint: str = ""
    oauth_client_id: str = ""
    oauth_client_secret: str = field(default="", repr=False)
    oauth_scope: str = ""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret value, to mask wherever a client's message is shown (``secrets.secret_redact``)."""
        return tuple(s for s in (self.sasl_password, self.ssl_key_pem, self.ssl_key_password,
                                 self.oauth_client_secret) if s)

    def librdkafka_options(self) -> dict[str, str]:
        """librdkafka's option names (the same for admin, consumer and producer)."""
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.uses_tls:
            config["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_endpoint_identification else "none"
            for option, value in (("ssl.ca.pem", self.ssl_ca_pem), ("ssl.certificate.pem", self.ssl_certificate_pem),
                                  ("ssl.key.pem", self.ssl_key_pem), ("ssl.key.password", self.ssl_key_password)):
                if value:
                    config[option] = value
        if self.sasl_mechanism == OAUTHBEARER:
            config.update({
                "sasl.mechanism": OAUTHBEARER,
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.token.endpoint.url": self.oauth_token_endpoint,
                "sasl.oauthbearer.client.id": self.oauth_client_id,
                "sasl.oauthbearer.client.secret": self.oauth_client_secret,
            })
            if self.oauth_scope:
                config["sasl.oauthbearer.scope"] = self.oauth_scope
        elif self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username
            config["sasl.password"] = self.sasl_password
        return config

    def for_java(self) -> ClusterConfig:
        """These settings with the client key as the Java client reads it:
        unencrypted PKCS#8 (``key_as_pkcs8``), so without a key password."""
        if not self.ssl_key_pem:
            return self
        return replace(self, ssl_key_pem=key_as_pkcs8(self.ssl_key_pem, self.ssl_key_password), ssl_key_password="")

    def java_options(self) -> dict[str, str]:
        """The Java client's option names: TLS trust and client certificate
        as PEM text (no key or trust store file anywhere), JAAS built from
        the secrets. Every option holding a secret has "password", "jaas" or
        "keystore.key" in its name (what Spark's redaction matches). The Java
        client reads only an unencrypted PKCS#8 key: give it ``for_java()``'s."""
        options = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.uses_tls:
            # The Java client's way of saying "none" is the empty string.
            options["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_endpoint_identification else ""
            if self.ssl_ca_pem:
                options["ssl.truststore.type"] = "PEM"
                options["ssl.truststore.certificates"] = self.ssl_ca_pem
            if self.ssl_certificate_pem:
                options["ssl.keystore.type"] = "PEM"
                options["ssl.keystore.certificate.chain"] = self.ssl_certificate_pem
                options["ssl.keystore.key"] = self.ssl_key_pem
                if self.ssl_key_password:
                    options["ssl.key.password"] = self.ssl_key_password
        mechanism = self.sasl_mechanism
        if mechanism:
            options["sasl.mechanism"] = mechanism
            if mechanism == OAUTHBEARER:
                options["sasl.login.callback.handler.class"] = OAUTH_LOGIN_HANDLER
                options["sasl.oauthbearer.token.endpoint.url"] = self.oauth_token_endpoint
                credentials = (f"clientId={_quoted(self.oauth_client_id)} "
                               f"clientSecret={_quoted(self.oauth_client_secret)}")
                if self.oauth_scope:
                    credentials += f" scope={_quoted(self.oauth_scope)}"
            else:
                credentials = f"username={_quoted(self.sasl_username)} password={_quoted(self.sasl_password)}"
            options["sasl.jaas.config"] = f"{LOGIN_MODULES[mechanism]} required {credentials};"
        return options

    def __repr__(self) -> str:
        # Never let a secret reach a log line or a traceback.
        return f"ClusterConfig(bootstrap_servers={self.bootstrap_servers!r}, security_protocol={self.security_protocol!r})"
