"""The pages' template filters: their one way to show a time (``when``: the
absolute time with the relative one beside it, "2026-11-25 08:01:40 UTC (5 min
ago)", which gapwatch/times.js rewrites in the viewer's time zone) and a
duration (``duration``), and the words for a finding's state, a group's kind
and stored structured data."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

from groups.domain import job_states
from groups.domain.expansion.plan import OUTCOME_LABELS
from groups.domain.group_kinds import EARLIEST_BY_DEFAULT, KIND_LABELS, group_kind
from groups.urgency_text import expiry_short
from groups.text import detail_rows as text_detail_rows
from groups.text import duration_words, key_words
from groups.text import stored_words as text_stored_words

register = template.Library()

# (seconds in the unit, its short name): "12 s", "5 min", "3 h", "2 d".
_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def relative(moment: datetime, *, now: datetime) -> str:
    """``moment`` relative to ``now`` in its largest whole unit: "just now",
    "12 s ago", "5 min ago", "in 3 h"."""
    seconds = int((now - moment).total_seconds())
    if abs(seconds) < 1:
        return "just now"
    for size, name in _UNITS:
        if abs(seconds) >= size:
            amount = abs(seconds) // size
            return f"{amount} {name} ago" if seconds > 0 else f"in {amount} {name}"
    return "just now"


def absolute(moment: datetime, *, precise: bool = False) -> str:
    """``2026-11-25 08:01:40 UTC`` (with milliseconds when ``precise``)."""
    moment = moment.astimezone(UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if precise:
        text += f".{moment.microsecond // 1000:03d}"
    return f"{text} UTC"


@register.filter
def when(value: datetime | None, precision: str = "") -> str:
    """``{{ job.created_at|when }}``: "2026-11-25 08:01:40 UTC (5 min ago)" in a
    ``<time>`` that gapwatch/times.js rewrites in the browser's time zone (the UTC
    time stays on hover). ``|when:"ms"`` keeps milliseconds (the pickup evidence);
    ``|when:"ago"`` shows the relative time alone, the absolute one on hover and for
    screen readers (the header's freshness line). None shows as "—"."""
    if value is None or value == "":
        return "—"
    if not isinstance(value, datetime):
        return str(value)
    precise = precision == "ms"
    shown = absolute(value, precise=precise)
    moment = value.astimezone(UTC).isoformat(timespec="milliseconds" if precise else "seconds")
    ago = relative(value, now=timezone.now())
    if precision == "ago":
        return format_html('<time datetime="{}" data-when="ago" title="{}">{}<span class="visually-hidden"> ({})'
                           '</span></time>', moment, shown, ago, shown)
    return format_html('<time datetime="{}" data-when="{}" title="{}"><span class="at">{}</span>'
                       '<span class="ago"> ({})</span></time>', moment, "ms" if precise else "s", shown, shown, ago)


@register.filter
def duration(seconds: float | int | None) -> str:
    """``{{ stage.seconds|duration }}``: "850 ms", "12.3 s", "4 min 5 s", "2 h 10 min"; None shows as "—"."""
    return "—" if seconds is None or seconds == "" else duration_words(float(seconds))


# An open finding's state "expired" (retention deleted part of its range; the
# rest is still repairable) is shown apart from the way out "expired" (retention
# took the whole range: closed).
_STATE_LABELS = {"expired": "partly expired"}


# Where a long name may wrap: after the separators of topic names and group ids.
_NAME_SEPARATORS = re.compile(r"([-._])")


@register.filter
def breakable(name: object) -> str:
    """``{{ group.group_id|breakable }}``: the name escaped, with a ``<wbr>``
    after each '-', '.' and '_' (the separators of topic names and of most
    group ids), so that a narrow cell wraps it there and never mid-word.
    A <wbr> is not copied with the text: a name copied from the page is the name. Escaping first is safe: no escaped
    entity contains a separator."""
    return mark_safe(_NAME_SEPARATORS.sub(r"\1<wbr>", str(conditional_escape(name))))


@register.filter
def words(key: object) -> str:
    """``{{ c.status|words }}``: a stored state or key in words ("repaired_after" → "repaired after")."""
    return key_words(key)


@register.filter
def status_words(status: str) -> str:
    """``{{ job.status|status_words }}``: a job's status as the pages say it (``job_states.STATUS_WORDS``)."""
    return job_states.STATUS_WORDS.get(status, key_words(status))


@register.filter
def status_tone(status: str) -> str:
    """``class="{{ job.status|status_tone }}"``: "ok" for a job that succeeded, "warn" for one that lost
    offsets or failed, nothing while it is active or when it was cancelled or refused."""
    if status == job_states.SUCCEEDED:
        return "ok"
    return "warn" if status in (job_states.SUCCEEDED_WITH_LOSS, job_states.FAILED) else ""


@register.filter
def status_undone(status: str) -> bool:
    """``{% if job.status|status_undone %}``: the job ended without doing what was planned
    (``job_states.UNDONE``): its findings stay open."""
    return status in job_states.UNDONE


@register.filter
def outcome_words(outcome: str) -> str:
    """``{{ decision.outcome|outcome_words }}``: an expansion's outcome for a group, as the plan names it."""
    return OUTCOME_LABELS.get(outcome, key_words(outcome))


@register.filter
def kind_words(kind: str) -> str:
    """``{{ decision.kind|kind_words }}``: a group kind stored by name ("share") in words ("share (KIP-932)")."""
    return KIND_LABELS.get(kind, key_words(kind))


@register.filter
def partition_offsets(offsets: object) -> str:
    """``{{ decision.committed|partition_offsets }}``: a stored ``{partition: offset}`` as words,
    "partition 4 at offset 0, partition 5 at offset 12", by partition number; a list of partitions
    as "partitions 4, 5"; nothing as "none"."""
    if isinstance(offsets, dict) and offsets:
        ordered = sorted(offsets.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else -1)
        return ", ".join(f"partition {partition} at offset {text_stored_words(offset)}" for partition, offset in ordered)
    if isinstance(offsets, list | tuple) and offsets:
        return f"partition{'s' if len(offsets) > 1 else ''} {', '.join(str(p) for p in offsets)}"
    return "none" if not offsets else text_stored_words(offsets)


@register.filter
def stored_words(value) -> str:
    """``{{ job.params|stored_words }}``: stored structured data in words (groups.text)."""
    return text_stored_words(value)


@register.filter
def detail_rows(detail) -> list[tuple[str, str]]:
    """``{% for label, words in event.detail|detail_rows %}``: an audit row's detail as rows of words."""
    return text_detail_rows(detail)


@register.filter
def all_in(items, collection) -> bool:
    """``{% if r.finding_ids|all_in:actable %}``: every item is in the collection
    (the person may act on every finding a button would act on)."""
    return all(item in collection for item in items or ())


@register.filter
def state_label(state: str) -> str:
    """An open finding's state as the pages name it."""
    return _STATE_LABELS.get(state, state)


@register.filter
def assumed_policy(group) -> str:
    """``{{ group|assumed_policy }}``: the policy the detection core assumes of
    the group when nobody declared one: "earliest" for a framework that starts
    there by default (a Connect sink, a streams group), else "latest"."""
    return "earliest" if group_kind(group.type, group.group_id) in EARLIEST_BY_DEFAULT else "latest"


@register.filter
def group_kind_label(group) -> str:
    """``{{ group|group_kind_label }}``: the kind of a group (a ConsumerGroup,
    or the triage's GroupInfo: anything with ``type`` and ``group_id``) in words."""
    return KIND_LABELS[group_kind(group.type, group.group_id)]


@register.filter
def group_kind_tag(group) -> str:
    """``{{ f.group|group_kind_tag }}``: the same as a tag, its kind in its
    class (``kind-share``); not a pill: the pages' pills are states."""
    kind = group_kind(group.type, group.group_id)
    return format_html('<span class="kind kind-{}">{}</span>', kind, KIND_LABELS[kind])


@register.filter
def expires_short(expires_at: datetime | None) -> str:
    """'expires in ~5 h (estimate)' for a retention estimate (groups.domain.urgency); '' without one."""
    return expiry_short(expires_at=expires_at, now=timezone.now())
