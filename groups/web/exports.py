"""CSV downloads: the audit trail and a reset job's offsets (like Kafka's
reset tool's ``--export``: group, topic, partition, before, planned, after).

Group ids, topic names and audit details are hostile text: every cell goes
through ``groups.text.csv_cell``, the one rule for CSV cells. The audit
export streams (it can be long); a reset export is one row per partition.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_http_methods

from groups.selectors.browse import audit_events_list
from groups.models import RemediationJob
from groups.text import csv_cell
from groups.web.forms import AuditFilterForm

AUDIT_COLUMNS = ("id", "at", "actor", "action", "cluster", "object_type", "object_id", "detail")
RESET_COLUMNS = ("group", "topic", "partition", "before", "planned", "after")


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
    events = audit_events_list(**form.selector_filters())
    response = StreamingHttpResponse(audit_csv_rows(events), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="gapwatch-audit.csv"'
    return response


@login_required
@require_http_methods(["GET"])
def job_export_csv(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(RemediationJob.objects.select_related("group"), id=job_id)
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
