"""How to reach a cluster: the client settings of one registered cluster.

Plain data, so that loading the models or planning a job never loads a
Kafka client; the adapter (``tasks.kafka``) turns it into client options.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClusterConfig:
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)

    def client_config(self) -> dict[str, str]:
        """librdkafka's option names (the same for admin, consumer and producer)."""
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username
            config["sasl.password"] = self.sasl_password
        return config

    def __repr__(self) -> str:
        # Never let the password reach a log line or a traceback.
        return f"ClusterConfig(bootstrap_servers={self.bootstrap_servers!r}, security_protocol={self.security_protocol!r})"
