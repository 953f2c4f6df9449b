"""The cluster form, one validation for the cluster pages, the admin and
``register_cluster``: bootstrap servers, SASL, TLS (a CA bundle, a client
certificate and key) and OAuth settings checked by the clusters service
(``cluster_settings_problems``), write-only secrets of bounded length, and a
webhook that may only go to public http(s) addresses."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from groups.domain.webhooks import webhook_url_problem
from groups.models import Cluster
from groups.services.clusters import EDITABLE_FIELDS, SECRETS, cluster_settings_problems

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


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value (a private key goes in, never out)."""

    def format_value(self, value):
        return None


def _secret_field(label: str, *, max_length: int, multiline: bool = False) -> forms.CharField:
    widget = (WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}) if multiline
              else forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}))
    field = forms.CharField(label=label, required=False, strip=multiline, max_length=max_length, widget=widget,
                            help_text="Write-only. Leave empty to keep the stored one.")
    field.write_only_secret = True
    return field


# Longer than any real PEM certificate chain or key; a CA bundle may be a system's whole bundle.
PEM_MAX_LENGTH = 64 * 1024
CA_BUNDLE_MAX_LENGTH = 512 * 1024
HOSTNAME_VERIFICATION = (("https", "on (https): the broker's certificate must name its host"),
                         ("none", "off (none)"))


class ClusterForm(forms.ModelForm):
    """Add or edit a cluster. Each secret (``SECRETS``) is write-only: the
    input is never filled in, empty keeps the stored one, and only its
    explicit "clear" box removes it. The CA bundle and the client
    certificate are public and shown back."""

    sasl_password = _secret_field("SASL password", max_length=SASL_PASSWORD_MAX_LENGTH)
    clear_sasl_password = forms.BooleanField(label="Clear the stored password", required=False)
    ssl_key_pem = _secret_field("Client key (PEM)", max_length=PEM_MAX_LENGTH, multiline=True)
    clear_ssl_key_pem = forms.BooleanField(label="Clear the stored client key", required=False)
    ssl_key_password = _secret_field("Client key password", max_length=SASL_PASSWORD_MAX_LENGTH)
    clear_ssl_key_password = forms.BooleanField(label="Clear the stored key password", required=False)
    oauth_client_secret = _secret_field("OAuth client secret", max_length=SASL_PASSWORD_MAX_LENGTH)
    clear_oauth_client_secret = forms.BooleanField(label="Clear the stored client secret", required=False)
    oauth_token_endpoint = forms.URLField(label="OAuth token endpoint", required=False, max_length=1000,
                                          assume_scheme="https",
                                          help_text="OAUTHBEARER: the OIDC token endpoint (client-credentials flow).")
    # A choice, not a checkbox: a form posted without it keeps verification on.
    ssl_endpoint_identification = forms.TypedChoiceField(
        label="Broker host name verification", choices=HOSTNAME_VERIFICATION, coerce=lambda value: value == "https",
        required=False, empty_value=True)

    field_order = ["name", "bootstrap_servers", "security_protocol", "sasl_mechanism", "sasl_username",
                   "sasl_password", "clear_sasl_password", "ssl_ca_pem", "ssl_endpoint_identification",
                   "ssl_certificate_pem", "ssl_key_pem", "clear_ssl_key_pem", "ssl_key_password",
                   "clear_ssl_key_password", "oauth_token_endpoint", "oauth_client_id", "oauth_client_secret",
                   "clear_oauth_client_secret", "oauth_scope"]

    class Meta:
        model = Cluster
        fields = list(EDITABLE_FIELDS)
        labels = {"sasl_username": "SASL user", "sasl_mechanism": "SASL mechanism"}
        help_texts = {"bootstrap_servers": "host:port[,host:port]", "name": "A short slug; it names the cluster "
                      "in the API and metrics and cannot be changed later.",
                      "ssl_ca_pem": "SSL / SASL_SSL: the CA certificates that signed the brokers' certificates. "
                      "Empty: the system's CAs.",
                      "ssl_certificate_pem": "Mutual TLS: this client's certificate (then its chain)."}
        widgets = {"ssl_ca_pem": forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
                   "ssl_certificate_pem": forms.Textarea(attrs={"rows": 4, "spellcheck": "false"})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Kafka's own spellings, as in client configurations.
        self.fields["security_protocol"].choices = [(value, value) for value in Cluster.SecurityProtocol.values]
        self.fields["sasl_mechanism"].choices = [("", "none")] + [
            (value, value) for value in Cluster.SaslMechanism.values if value
        ]
        self.fields["ssl_ca_pem"].max_length = CA_BUNDLE_MAX_LENGTH
        self.fields["ssl_certificate_pem"].max_length = PEM_MAX_LENGTH
        self.initial["ssl_endpoint_identification"] = "https" if self.instance.ssl_endpoint_identification else "none"
        for name in SECRETS:
            # On this form's own copies of the fields: the template says whether each is stored.
            self.fields[name].is_stored = self.secret_is_set(name)
            self.fields[f"clear_{name}"].clears_secret = True
            self.fields[f"clear_{name}"].is_stored = self.fields[name].is_stored
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["name"].help_text = ""

    def secret_is_set(self, name: str) -> bool:
        if not self.instance.pk:
            return False
        annotated = getattr(self.instance, f"{name}_set", None)  # from groups.selectors.lists.clusters_list
        if annotated is not None:
            return annotated
        return self.instance.has_secret(name)

    @property
    def password_is_set(self) -> bool:
        return self.secret_is_set("sasl_password")

    @property
    def secrets(self) -> dict[str, str]:
        """The secrets entered (empty: keep the stored one)."""
        return {name: self.cleaned_data.get(name, "") for name in SECRETS}

    @property
    def cleared(self) -> set[str]:
        return {name for name in SECRETS if self.cleaned_data.get(f"clear_{name}")}

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
        for name in SECRETS:
            if data.get(name) and data.get(f"clear_{name}"):
                self.add_error(f"clear_{name}", "Either enter a new one or clear it, not both."
                               if name != "sasl_password" else "Either enter a new password or clear it, not both.")
        settings_given = {name: data[name] for name in self._meta.fields if name in data}
        problems = cluster_settings_problems(data=settings_given, secrets=self.secrets, clear=self.cleared,
                                             cluster=self.instance if self.instance.pk else None)
        for name, problem in problems.items():
            self.add_error(name if name in self.fields else None, problem)
        return data
