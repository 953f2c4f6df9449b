"""Downloads: the audit trail and the findings of the per-partition list
(its current filter and sort) as CSV, the same findings as JSON, and a reset
job's offsets (like Kafka's reset tool's ``--export``: group, topic,
partition, before, planned, after).

Group ids, topic names and audit details are hostile text: every CSV cell
goes through ``groups.text.csv_cell``, the one rule for CSV cells; JSON keeps
the text verbatim, with ``<``, ``>`` and ``&`` escaped so no browser reads
markup in it. The audit and findings exports stream (they can be long); a
reset export is one row per partition.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_http_methods

from groups.domain.group_kinds import group_kind
from groups.selectors.access import scope_of, visible_audit_events, visible_jobs
from groups.selectors.browse import audit_events_list
from groups.models import Finding, RemediationJob
from groups.text import csv_cell
from groups.web.forms import AuditFilterForm
from groups.web.views import findings_filtered
from groups.selectors.jobs import jobs_all

AUDIT_COLUMNS = ("id", "at", "actor", "action", "cluster", "object_type", "object_id", "detail")
RESET_COLUMNS = ("group", "topic", "partition", "before", "planned", "after")
# The API's names for a finding's fields (groups.api.schemas.FindingOut), plus its way out.
FINDING_COLUMNS = (
    "id", "cluster", "topic", "partition", "group", "group_type", "generation", "state", "resolution", "found_at", "closed_at",
    "closed_reason", "log_start_offset", "high_watermark", "committed_offset", "lag", "missed_definite",
    "missed_possible", "missed_definite_if_latest", "missed_possible_if_latest", "expired", "backfill_start", "backfill_end", "likely_start", "likely_start_evidence",
    "policy_source", "owner_client_id", "owner_host", "explanation",
)


def detail_text(detail: object) -> str:
    """An audit row's detail as one JSON text (keys sorted)."""
    return json.dumps(detail, sort_keys=True, ensure_ascii=False, default=str)


class _Echo:
    """A file that hands back what is written: csv.writer then yields lines."""

    def write(self, value: str) -> str:
        return value


def audit_csv_rows(events) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(AUDIT_COLUMNS)
    for event in events.iterator(chunk_size=2000):
        actor = "system" if event.system else (event.actor.username if event.actor else "deleted user")
        yield writer.writerow([csv_cell(value) for value in (
            event.id, event.at.isoformat(), actor, event.action, event.cluster.name if event.cluster else "",
            event.object_type, event.object_id, detail_text(event.detail),
        )])


def finding_export_row(finding: Finding) -> tuple:
    """One finding as FINDING_COLUMNS: offsets as numbers, times in ISO 8601
    (UTC), ``resolution`` "open" while it is open."""
    return (
        finding.id, finding.cluster.name, finding.topic.name, finding.partition, finding.group.group_id,
        group_kind(finding.group.type, finding.group.group_id), finding.generation.number, finding.state,
        "open" if finding.closed_at is None else finding.resolution or "closed",
        finding.created_at.isoformat(), finding.closed_at.isoformat() if finding.closed_at else None,
        finding.closed_reason, finding.log_start_offset, finding.high_watermark, finding.committed_offset,
        finding.lag, finding.missed_definite, finding.missed_possible, finding.missed_definite_if_latest,
        finding.missed_possible_if_latest, finding.expired, finding.backfill_start,
        finding.backfill_end, finding.likely_start, finding.likely_start_evidence, finding.policy_source or None,
        finding.owner_client_id, finding.owner_host, finding.explanation,
    )


def findings_csv_rows(findings) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(FINDING_COLUMNS)
    for finding in findings.iterator(chunk_size=2000):
        yield writer.writerow([csv_cell(value) for value in finding_export_row(finding)])


# What a browser could read as markup, escaped as JSON allows.
_JSON_MARKUP = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def findings_json_rows(findings) -> Iterator[str]:
    """A JSON array of objects, one line per finding, streamed."""
    separator = "[\n"
    for finding in findings.iterator(chunk_size=2000):
        row = dict(zip(FINDING_COLUMNS, finding_export_row(finding), strict=True))
        yield separator + json.dumps(row, ensure_ascii=False).translate(_JSON_MARKUP)
        separator = ",\n"
    yield "[]\n" if separator == "[\n" else "\n]\n"


def _findings_download(request: HttpRequest, rows, *, content_type: str, extension: str) -> HttpResponse:
    form, findings, _ = findings_filtered(request)
    if not form.is_valid():
        return HttpResponseBadRequest("bad filter: " + "; ".join(
            f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()
        ), content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(rows(findings), content_type=content_type)
    name = "gapwatch-findings-history" if form.history else "gapwatch-findings"
    response["Content-Disposition"] = f'attachment; filename="{name}.{extension}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_http_methods(["GET", "HEAD"])
def findings_export_csv(request: HttpRequest) -> HttpResponse:
    """The per-partition list's findings (open work, or the history with
    ``view=history``) under its filters and sort, as CSV."""
    return _findings_download(request, findings_csv_rows, content_type="text/csv; charset=utf-8", extension="csv")


@login_required
@require_http_methods(["GET", "HEAD"])
def findings_export_json(request: HttpRequest) -> HttpResponse:
    """The same findings as ``findings_export_csv``, as a JSON array."""
    return _findings_download(request, findings_json_rows, content_type="application/json", extension="json")


def reset_export_rows(job: RemediationJob) -> list[tuple]:
    """Per partition: the offset before, the planned one, and the one read
    back after the commit (blank until the job ran)."""
    done = {(row["topic"], row["partition"]): row for row in (job.result or {}).get("partitions", [])}
    rows = []
    for planned in job.plan:
        key = (planned["topic"], planned["partition"])
        ran = done.get(key)
        before = ran["before"] if ran else planned.get("current")
        rows.append((job.group.group_id, key[0], key[1], before, planned["planned"], ran["after"] if ran else None))
    return rows


@login_required
@require_http_methods(["GET", "HEAD"])
def audit_export(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return HttpResponseBadRequest("bad filter: " + "; ".join(
            f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()
        ), content_type="text/plain; charset=utf-8")
    events = visible_audit_events(scope_of(request.user), audit_events_list(**form.selector_filters()),
                                  user=request.user)
    response = StreamingHttpResponse(audit_csv_rows(events), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="gapwatch-audit.csv"'
    return response


@login_required
@require_http_methods(["GET"])
def job_export_csv(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(visible_jobs(scope_of(request.user), jobs_all().select_related("group")),
                            id=job_id)
    if job.kind != RemediationJob.Kind.RESET:
        raise Http404("only offset-reset jobs have an offset export")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="gapwatch-job-{job.id}-reset.csv"'
    response["X-Content-Type-Options"] = "nosniff"
    writer = csv.writer(response)
    writer.writerow(RESET_COLUMNS)
    for row in reset_export_rows(job):
        writer.writerow([csv_cell(cell) for cell in row])
    return response
