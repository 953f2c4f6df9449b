"""How to reach a cluster: the client settings of one registered cluster.

Plain data, so that loading the models or planning a job never loads a
Kafka client; the adapter (``tasks.kafka``) turns it into client options
(``client_config``, librdkafka's names), the Spark job into the Java
client's (``tasks.spark.reader``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
OAUTHBEARER = "OAUTHBEARER"


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

    def client_config(self) -> dict[str, str]:
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

    def __repr__(self) -> str:
        # Never let a secret reach a log line or a traceback.
        return f"ClusterConfig(bootstrap_servers={self.bootstrap_servers!r}, security_protocol={self.security_protocol!r})"
