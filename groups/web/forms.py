"""Forms of the browse pages: validation only. The writes are services in
``groups.web.browse`` (they check the permission again and audit)."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

from django import forms
from django.utils import timezone

from groups.models import Cluster, ConsumerGroup
from groups.services.remediation import SINKS, TOPIC_NAME

# host:port, host a DNS name, an IPv4 address or a bracketed IPv6 address.
_HOST_PORT = re.compile(
    r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):(?P<port>[0-9]{1,5})$"
)
SASL_PROTOCOLS = (Cluster.SecurityProtocol.SASL_PLAINTEXT, Cluster.SecurityProtocol.SASL_SSL)
# The fields a person edits; what the audit compares before and after.
CLUSTER_FIELDS = ("name", "bootstrap_servers", "security_protocol", "sasl_mechanism", "sasl_username")
GROUP_SETTINGS_FIELDS = ("declared_policy", "auto_repair", "backfill_sink", "replay_topic")


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
        label="SASL password", required=False, strip=False,
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
        annotated = getattr(self.instance, "sasl_password_set", None)  # from selectors.clusters_list
        return annotated if annotated is not None else self.instance.has_sasl_password

    def clean_bootstrap_servers(self) -> str:
        return normalize_bootstrap_servers(self.cleaned_data["bootstrap_servers"])

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


class ClusterEnabledForm(forms.Form):
    """The state asked for, not a flip: a double click cannot undo itself."""

    enabled = forms.TypedChoiceField(choices=[("true", "enable"), ("false", "disable")],
                                     coerce=lambda value: value == "true")


class GroupSettingsForm(forms.ModelForm):
    backfill_sink = forms.ChoiceField(choices=[(sink, sink) for sink in SINKS])

    class Meta:
        model = ConsumerGroup
        fields = list(GROUP_SETTINGS_FIELDS)
        labels = {"declared_policy": "Declared auto.offset.reset", "auto_repair": "Auto repair",
                  "backfill_sink": "Backfill sink", "replay_topic": "Replay topic"}
        help_texts = {
            "declared_policy": "What the group's consumers use for auto.offset.reset; “unknown” means latest is "
                               "assumed.",
            "auto_repair": "Reset new partitions to their log start at once when the group is Empty at detection.",
            "replay_topic": "Where a backfill with the kafka sink writes.",
        }

    def clean_replay_topic(self) -> str:
        topic = self.cleaned_data["replay_topic"].strip()
        if topic and not TOPIC_NAME.match(topic):
            raise forms.ValidationError("A topic name has 1–249 letters, digits, dots, underscores or dashes.")
        return topic

    def clean(self) -> dict:
        data = super().clean()
        if data.get("backfill_sink") == "kafka" and not data.get("replay_topic"):
            self.add_error("replay_topic", "The kafka sink needs a replay topic.")
        return data


class AuditFilterForm(forms.Form):
    """Filters of the audit page and its CSV export. Dates are whole UTC days,
    both ends included."""

    action = forms.CharField(required=False, max_length=60)
    actor = forms.CharField(required=False, max_length=150, help_text="a username, or “system”")
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.only("id", "name").order_by("name"), required=False,
                                     empty_label="all")
    object_type = forms.CharField(required=False, max_length=40, label="Object type")
    date_from = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict:
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            self.add_error("date_to", "The end date is before the start date.")
        return data

    def selector_filters(self) -> dict:
        """Keyword arguments for ``audit_events_list``: the day range as a
        half-open interval [from 00:00, day after "to" 00:00)."""
        data = self.cleaned_data
        utc = timezone.get_current_timezone()
        return {
            "action": data.get("action") or None,
            "actor": data.get("actor") or None,
            "cluster": data.get("cluster"),
            "object_type": data.get("object_type") or None,
            "at_from": datetime.combine(data["date_from"], time.min, utc) if data.get("date_from") else None,
            "at_before": (datetime.combine(data["date_to"] + timedelta(days=1), time.min, utc)
                          if data.get("date_to") else None),
        }
