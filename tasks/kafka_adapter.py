"""The only module that imports confluent-kafka.

It turns the client's answers into plain data and raises one error type,
``KafkaUnavailable``. Creating an adapter opens no connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient


class KafkaUnavailable(Exception):
    """The cluster could not be reached, or answered with an error."""


@dataclass(frozen=True)
class ClusterConfig:
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = ""

    def client_config(self) -> dict[str, str]:
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


class KafkaAdapter:
    def __init__(self, config: ClusterConfig, *, timeout: float = 10.0) -> None:
        self._config = config
        self._timeout = timeout
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(
                {**self._config.client_config(), "socket.timeout.ms": int(self._timeout * 1000)}
            )
        return self._admin

    def ping(self) -> int:
        """Ask the cluster for its metadata; return the number of brokers."""
        try:
            metadata = self.admin.list_topics(timeout=self._timeout)
        except KafkaException as error:
            raise KafkaUnavailable(f"{self._config.bootstrap_servers}: {error.args[0]}") from None
        if not metadata.brokers:
            raise KafkaUnavailable(f"{self._config.bootstrap_servers}: no brokers in metadata")
        return len(metadata.brokers)
