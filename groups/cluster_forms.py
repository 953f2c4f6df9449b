"""The cluster form, one validation for the cluster pages and the admin:
bootstrap servers, SASL settings, a write-only password of bounded length, and
a webhook that may only go to public http(s) addresses."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from groups.domain.webhooks import webhook_url_problem
from groups.models import Cluster
from groups.services.clusters import CLUSTER_FIELDS

# host:port, host a DNS name, an IPv4 address or a bracketed IPv6 address.
_HOST_PORT = re.compile(
    r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):(?P<port>[0-9]{1,5})$"
)
SASL_PROTOCOLS = (Cluster.SecurityProtocol.SASL_PLAINTEXT, Cluster.SecurityProtocol.SASL_SSL)
# Longer than any real SASL secret; a megabyte of "password" is an attack, not a password.
SASL_PASSWORD_MAX_LENGTH = 1024


def normalize_bootstrap_servers(value: str) -> str:
    """``host:port[,host:port]`` with blanks around commas removed; a
    ValidationError names the first entry that is not host:port."""
    entries = [entry.strip() for entry in value.split(",")]
    if not value.strip() or any(not entry for entry in entries):
        raise forms.ValidationError("Enter host:port, or several separated by commas.")
    for entry in entries:
        match = _HOST_PORT.match(entry)
        if match is None or not 1 <= int(match["port"]) <= 65535:
            raise forms.ValidationError(f"“{entry}” is not host:port (port 1–65535).")
    return ",".join(entries)


class ClusterForm(forms.ModelForm):
    """Add or edit a cluster. The SASL password is write-only: the input is
    never filled in, empty keeps the stored one, and only an explicit
    "clear password" removes it."""

    sasl_password = forms.CharField(
        label="SASL password", required=False, strip=False, max_length=SASL_PASSWORD_MAX_LENGTH,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the stored password.",
    )
    clear_sasl_password = forms.BooleanField(label="Clear the stored password", required=False)

    class Meta:
        model = Cluster
        fields = list(CLUSTER_FIELDS)
        labels = {"sasl_username": "SASL user", "sasl_mechanism": "SASL mechanism"}
        help_texts = {"bootstrap_servers": "host:port[,host:port]", "name": "A short slug; it names the cluster "
                      "in the API and metrics and cannot be changed later."}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Kafka's own spellings, as in client configurations.
        self.fields["security_protocol"].choices = [(value, value) for value in Cluster.SecurityProtocol.values]
        self.fields["sasl_mechanism"].choices = [("", "none")] + [
            (value, value) for value in Cluster.SaslMechanism.values if value
        ]
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["name"].help_text = ""

    @property
    def password_is_set(self) -> bool:
        if not self.instance.pk:
            return False
        annotated = getattr(self.instance, "sasl_password_set", None)  # from groups.selectors.lists.clusters_list
        return annotated if annotated is not None else self.instance.has_sasl_password

    def clean_bootstrap_servers(self) -> str:
        return normalize_bootstrap_servers(self.cleaned_data["bootstrap_servers"])

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data.get("webhook_url", "")
        problem = url and webhook_url_problem(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
        if problem:
            raise forms.ValidationError(problem)
        return url

    def clean(self) -> dict:
        data = super().clean()
        protocol = data.get("security_protocol")
        mechanism = data.get("sasl_mechanism", "")
        password, clear = data.get("sasl_password", ""), data.get("clear_sasl_password", False)
        if password and clear:
            self.add_error("clear_sasl_password", "Either enter a new password or clear it, not both.")
        if protocol in SASL_PROTOCOLS:
            if not mechanism:
                self.add_error("sasl_mechanism", f"{protocol} needs a SASL mechanism.")
            if not data.get("sasl_username"):
                self.add_error("sasl_username", f"{protocol} needs a SASL user.")
            if not password and (clear or not self.password_is_set):
                self.add_error("sasl_password", f"{protocol} needs a password.")
        elif protocol and mechanism:
            self.add_error("sasl_mechanism", "A SASL mechanism needs security protocol SASL_PLAINTEXT or SASL_SSL.")
        return data
