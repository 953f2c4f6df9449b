"""Forms of the browse pages and the admin: validation only, written once.
The writes are services in ``groups.services.clusters`` (they check the
permission again and audit)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta

from django import forms
from django.utils import timezone

from groups.models import ConsumerGroup, Finding, RemediationJob
from groups.cluster_forms import ClusterForm  # noqa: F401 - the cluster pages' form, shared with the admin
from groups.domain.group_kinds import GROUP_KINDS, KIND_LABELS
from groups.domain.replay_topics import TOPIC_NAME
from groups.domain.sinks import GROUP_SINKS, KAFKA
from groups.services.clusters import GROUP_SETTINGS_FIELDS
from groups.selectors.clusters import cluster_choices


def page_field() -> forms.IntegerField:
    """``page`` of a list: a whole number from 1 (past the last page, the list
    shows its last); anything else is the form's error, never ignored."""
    words = "a page is a whole number from 1"
    return forms.IntegerField(required=False, min_value=1, error_messages={"invalid": words, "min_value": words})


class ClusterEnabledForm(forms.Form):
    """The state asked for, not a flip: a double click cannot undo itself."""

    enabled = forms.TypedChoiceField(choices=[("true", "enable"), ("false", "disable")],
                                     coerce=lambda value: value == "true")


class GroupSettingsForm(forms.ModelForm):
    backfill_sink = forms.ChoiceField(choices=[(sink, sink) for sink in GROUP_SINKS])
    # Left out of a request (a form or script older than the field): unchanged.
    declared_isolation = forms.ChoiceField(
        choices=ConsumerGroup.Isolation.choices, required=False, label="Declared isolation.level",
        help_text="What the group's consumers use for isolation.level; “unknown” bounds a latest start by the last "
                  "stable offset (read_committed, librdkafka's default), read_uncommitted (the Java client's "
                  "default) by the high watermark.")

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

    def clean_declared_isolation(self) -> str:
        return self.cleaned_data["declared_isolation"] or self.instance.declared_isolation

    def clean_replay_topic(self) -> str:
        topic = self.cleaned_data["replay_topic"].strip()
        if topic and not TOPIC_NAME.match(topic):
            raise forms.ValidationError("A topic name has 1–249 letters, digits, dots, underscores or dashes.")
        return topic

    def clean(self) -> dict:
        data = super().clean()
        if data.get("backfill_sink") == KAFKA and not data.get("replay_topic"):
            self.add_error("replay_topic", "The kafka sink needs a replay topic.")
        return data


class AuditFilterForm(forms.Form):
    """Filters of the audit page and its CSV export. Dates are whole UTC days,
    both ends included."""

    action = forms.CharField(required=False, max_length=60)
    actor = forms.CharField(required=False, max_length=150, help_text="a username, or “system”")
    cluster = forms.ModelChoiceField(queryset=cluster_choices(), required=False,
                                     empty_label="all")
    object_type = forms.CharField(required=False, max_length=40, label="Object type")
    # One object's trail (the finding, job and expansion pages link it); with its type.
    object_id = forms.CharField(required=False, max_length=40, label="Object id")
    date_from = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    page = page_field()

    def clean(self) -> dict:
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            self.add_error("date_to", "The end date is before the start date.")
        if data.get("object_id") and not data.get("object_type"):
            self.add_error("object_id", "An object id needs its object type (finding, job, expansion, ...).")
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
            "object_id": data.get("object_id") or None,
            "at_from": datetime.combine(data["date_from"], time.min, utc) if data.get("date_from") else None,
            "at_before": (datetime.combine(data["date_to"] + timedelta(days=1), time.min, utc)
                          if data.get("date_to") else None),
        }


class BrowseFilterForm(forms.Form):
    """The groups and topics list pages: a cluster (by name), part of a name
    (ignoring case), an order (a key of the list's sorts) and ``all``: "1" shows
    the deleted topics or gone groups too. A sort or ``all`` the page does not
    offer is an error, never ignored."""

    cluster = forms.CharField(required=False, max_length=100)
    q = forms.CharField(required=False, max_length=1000, label="Name contains")
    sort = forms.ChoiceField(required=False)
    all = forms.ChoiceField(required=False, choices=[("", "no"), ("1", "yes")])
    page = page_field()

    def __init__(self, data, *, sorts: dict[str, tuple[str, tuple[str, ...]]]) -> None:
        super().__init__(data)
        self.fields["sort"].choices = [("", "name"), *((key, label) for key, (label, _) in sorts.items())]

    def selector_filters(self) -> dict:
        """The list's narrowing (what ``all`` widens is the caller's: each list names it)."""
        return {"cluster": self.cleaned_data.get("cluster") or None, "search": self.cleaned_data.get("q") or None}

    def sort_key(self) -> str:
        return self.cleaned_data.get("sort") or "name"

    def shows_all(self) -> bool:
        return self.cleaned_data.get("all") == "1"


class FindingFilterForm(forms.Form):
    """Filters of the findings page. Topic and group match part of a name
    (ignoring case); a state, group type, way out or order the page does not
    offer is an error, never ignored; the history (``view=history``) adds
    closed findings, the way out and the days found (UTC, both ends
    included)."""

    cluster = forms.CharField(required=False, max_length=100)
    topic = forms.CharField(required=False, max_length=249)
    group = forms.CharField(required=False, max_length=1000)
    state = forms.ChoiceField(required=False, choices=[("", "all"), *Finding.State.choices])
    group_type = forms.ChoiceField(required=False, label="Group type",
                                   choices=[("", "all"), *((kind, KIND_LABELS[kind]) for kind in GROUP_KINDS)])
    resolution = forms.ChoiceField(required=False, label="Way out",
                                   choices=[("", "any"), ("open", "open"), *Finding.Resolution.choices])
    since = forms.DateField(required=False, label="Found from", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="Found to", widget=forms.DateInput(attrs={"type": "date"}))
    sort = forms.ChoiceField(required=False)
    page = page_field()

    def __init__(self, data, *, history: bool, sorts: Iterable[str] = ()) -> None:
        """``sorts``: the orders the list offers (none: the page has no order to pick)."""
        super().__init__(data)
        self.history = history
        self.fields["sort"].choices = [("", "default"), *((key, key) for key in sorts)]

    def clean(self) -> dict:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "The end date is before the start date.")
        return data

    def selector_filters(self) -> dict:
        """Keyword arguments for ``groups.selectors.lists.findings_list``."""
        data = self.cleaned_data
        filters = {
            "cluster": data.get("cluster") or None,
            "topic_contains": data.get("topic") or None,
            "group_contains": data.get("group") or None,
            "state": data.get("state") or None,
            "group_type": data.get("group_type") or None,
        }
        if self.history:
            resolution = data.get("resolution")
            filters.update(
                include_closed=True,
                resolution=resolution or None,
                found_since=data.get("since"), found_until=data.get("until"),
            )
        return filters


class JobFilterForm(forms.Form):
    """Filters of the jobs page: a status and a kind the page offers, and the page."""

    status = forms.ChoiceField(required=False, choices=[("", "all"), *((s, s) for s in RemediationJob.STATUSES)])
    kind = forms.ChoiceField(required=False, choices=[("", "all"), *RemediationJob.Kind.choices])
    page = page_field()

    def selector_filters(self) -> dict:
        return {key: self.cleaned_data[key] for key in ("status", "kind") if self.cleaned_data.get(key)}
