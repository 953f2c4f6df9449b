"""The plan and result of a reset job as CSV, like Kafka's reset tool's
``--export``: one row per partition (group, topic, partition, before,
planned, after).

Group ids (and topic names) are hostile text: every cell goes through
``groups.text.csv_cell``, the one rule for CSV cells.
"""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from groups.models import RemediationJob
from groups.text import csv_cell

CSV_COLUMNS = ("group", "topic", "partition", "before", "planned", "after")


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
@require_GET
def job_export_csv(request, job_id: int) -> HttpResponse:
    job = get_object_or_404(RemediationJob.objects.select_related("group"), id=job_id)
    if job.kind != RemediationJob.Kind.RESET:
        raise Http404("only offset-reset jobs have an offset export")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="gapwatch-job-{job.id}-reset.csv"'
    response["X-Content-Type-Options"] = "nosniff"
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for row in reset_export_rows(job):
        writer.writerow([csv_cell(cell) for cell in row])
    return response
