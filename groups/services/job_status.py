"""The one way a job of either kind (a remediation, an expansion) changes
status: a compare-and-set by the table of ``groups.domain.job_states``.
Each kind adds its own side effects through the hooks; the core is here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from groups.domain import job_states
from groups.domain.reasons import system_text
from groups.models import ExpansionJob, RemediationJob
from groups.services.audit import audit_record

Job = RemediationJob | ExpansionJob


def job_status_move(
    *, model: type[Job], job_id: int, from_statuses: Iterable[str], to_status: str, actor=None,
    detail: dict | Callable[[Job], dict] | None = None, before: Callable[[], object] | None = None,
    after: Callable[[Job], object] | None = None, **fields: Any,
) -> bool:
    """Move the job ``job_id`` of ``model`` to ``to_status``, only while it is
    in one of ``from_statuses``; False (nothing written) when another request
    or worker moved it first.

    1. Every move from ``from_statuses`` must be in the kind's table: one that
       is not is a ValueError (a mistake in the caller, not a race).
    2. In one transaction: ``before()`` (a remediation locks its findings
       first, as every lifecycle action does), then the update filtered on the
       old status, with ``fields``, ``updated_at`` and the move's moments
       (``started_at``, ``finished_at``) unless given; ``status_reason`` and
       ``error`` are a system's text, cut to one size.
    3. The audit row ``<kind>.<status>`` (``job.failed``, ``expansion.approved``)
       with ``detail``: a dict, or a function of the moved row.
    4. ``after(job)``: the kind's own follow-ups, in the same transaction.
    """
    kind = model.JOB_KIND
    from_statuses = list(from_statuses)
    refused = [status for status in from_statuses if not job_states.move_allowed(kind, status, to_status)]
    if refused:
        raise ValueError(f"a {kind} job may not move from {', '.join(refused)} to {to_status}")
    now = timezone.now()
    for stamp in job_states.move_stamps(to_status):
        fields.setdefault(stamp, now)
    for text in ("status_reason", "error"):
        if fields.get(text):
            fields[text] = system_text(fields[text])
    with transaction.atomic():
        if before is not None:
            before()
        if not model.objects.filter(id=job_id, status__in=from_statuses).update(status=to_status, updated_at=now,
                                                                               **fields):
            return False
        job = model.objects.select_related("cluster").get(id=job_id)
        audit_record(action=job_states.audit_action(kind, to_status), actor=actor, cluster=job.cluster,
                     object_type=job_states.AUDIT_NAMES[kind], object_id=job_id,
                     detail=detail(job) if callable(detail) else (detail or {}))
        if after is not None:
            after(job)
    return True
