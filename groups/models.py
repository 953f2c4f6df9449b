from __future__ import annotations

from django.db import models

from groups import crypto
from tasks.kafka_adapter import ClusterConfig


class Cluster(models.Model):
    """A Kafka cluster Gapwatch watches. The SASL password is stored encrypted
    and is never rendered: forms and APIs only say whether one is set."""

    class SecurityProtocol(models.TextChoices):
        PLAINTEXT = "PLAINTEXT"
        SSL = "SSL"
        SASL_PLAINTEXT = "SASL_PLAINTEXT"
        SASL_SSL = "SASL_SSL"

    class SaslMechanism(models.TextChoices):
        NONE = "", "none"
        PLAIN = "PLAIN"
        SCRAM_SHA_256 = "SCRAM-SHA-256"
        SCRAM_SHA_512 = "SCRAM-SHA-512"

    class Status(models.TextChoices):
        NEW = "new"
        OK = "ok"
        UNREACHABLE = "unreachable"
        ERROR = "error"

    name = models.SlugField(max_length=100, unique=True)
    bootstrap_servers = models.CharField(max_length=1000)
    security_protocol = models.CharField(
        max_length=20, choices=SecurityProtocol.choices, default=SecurityProtocol.PLAINTEXT
    )
    sasl_mechanism = models.CharField(max_length=20, choices=SaslMechanism.choices, blank=True, default="")
    sasl_username = models.CharField(max_length=255, blank=True, default="")
    sasl_password_encrypted = models.TextField(blank=True, default="", editable=False)
    enabled = models.BooleanField(default=True)
    webhook_url = models.URLField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.NEW)
    last_poll_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_sasl_password(self) -> bool:
        return bool(self.sasl_password_encrypted)

    def set_sasl_password(self, plaintext: str) -> None:
        self.sasl_password_encrypted = crypto.encrypt(plaintext) if plaintext else ""

    def client_config(self) -> ClusterConfig:
        """What the Kafka adapter needs to connect; the only place the password is decrypted."""
        return ClusterConfig(
            bootstrap_servers=self.bootstrap_servers,
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=crypto.decrypt(self.sasl_password_encrypted) if self.sasl_password_encrypted else "",
        )
