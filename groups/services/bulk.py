"""Actions on a selection of findings across groups and clusters (issue 22,
item 7): dismiss them with one reason, or approve one job per finding. Each
finding is still one action of ``remediation`` (its own lock, checks, audit
row), refused on its own with why; bad input writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from groups.models import Finding, RemediationJob
from groups.services import dispatch
from groups.services.access import OutOfScope, approver_require
from groups.services.lifecycle import Conflict, FindingNotFound, findings_lock, reason_require
from groups.services.previews import findings_bulk_preview
from groups.services.remediation import (
    DISMISSAL,
    ChangedSincePreview,
    finding_dismiss,
    job_request_previewed,
)

# The most findings one bulk action takes (the API's largest page).
MAX_BULK_FINDINGS = 500
_MAX_ROW_ID = 2**63 - 1


def bulk_ids(finding_ids: Iterable[int], *, verb: str) -> list[int]:
    """A selection's ids, sorted and distinct: whole numbers that can be row
    ids, 1 to MAX_BULK_FINDINGS of them; otherwise a ValidationError."""
    ids = list(finding_ids)
    if any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= _MAX_ROW_ID for i in ids):
        raise ValidationError("finding ids are whole numbers from 1 to 2^63-1")
    ids = sorted(set(ids))
    if not ids:
        raise ValidationError(f"select at least one finding to {verb}")
    if len(ids) > MAX_BULK_FINDINGS:
        raise ValidationError(f"at most {MAX_BULK_FINDINGS} findings at once, not {len(ids)}")
    return ids


@dataclass(frozen=True)
class BulkDismissal:
    """What a bulk dismissal did: the findings dismissed, and each one
    refused with why (unknown, closed already, a job active on it)."""

    dismissed: tuple[int, ...]
    refused: tuple[tuple[int, str], ...]


def findings_dismiss(*, user, finding_ids: Iterable[int], reason: str) -> BulkDismissal:
    """Dismiss a selection of findings (of any groups) with one reason, each
    still one ``finding_dismiss``: its own lock, checks and audit row.

    1. Check the role, the reason and the ids (whole numbers that can be
       row ids, 1 to MAX_BULK_FINDINGS of them) before anything is written:
       bad input is a ValidationError and nothing is written.
    2. In one transaction, dismiss the findings in id order (the lifecycle's
       lock order), each in a savepoint: one that is unknown, closed (a
       repeated request) or has an active job is refused with the reason
       and the others are dismissed.
    """
    approver_require(user)
    reason = reason_require(reason, what=DISMISSAL)
    ids = bulk_ids(finding_ids, verb="dismiss")
    dismissed, refused = [], []
    with transaction.atomic():
        for finding_id in ids:
            try:
                finding_dismiss(user=user, finding_id=finding_id, reason=reason)
            except (FindingNotFound, Conflict, OutOfScope) as error:
                refused.append((finding_id, " ".join(error.messages) if isinstance(error, ValidationError)
                                else str(error)))
            else:
                dismissed.append(finding_id)
    return BulkDismissal(dismissed=tuple(dismissed), refused=tuple(refused))


CHANGED_SINCE_PREVIEW = "changed since the preview: preview again to see its plan now"


@dataclass(frozen=True)
class BulkApproval:
    """What a bulk approval did: the jobs it created, one per finding
    (finding id, job), and each finding refused with why."""

    jobs: tuple[tuple[int, RemediationJob], ...]
    refused: tuple[tuple[int, str], ...]


def findings_approve(
    *, user, finding_ids: Iterable[int], kind: str, previewed: Mapping[int, str] | None = None,
) -> BulkApproval:
    """Approve one job of ``kind`` per finding of a selection (of any groups
    and clusters), each exactly as its single approval: planned on its own
    (``previews.findings_bulk_preview``) and created by
    ``job_request_previewed`` (four-eyes, audit rows, enqueue after commit).

    1. Check the role, the kind and the ids before anything is written: bad
       input is a ValidationError; a task queue that does not answer is
       QueueUnavailable (unless four-eyes holds the jobs back); nothing is
       written.
    2. In one transaction, lock the findings (id order, the lifecycle's),
       then plan each. One that is unknown, closed, covered, under an active
       job, or that its own preview refuses is refused with why.
    3. ``previewed`` (the page's fingerprints, by finding id): a finding whose
       plan fingerprints differently now, or that the preview did not show
       as approvable, is refused as changed. None (the API) approves the plan
       made now, as the single approval's API does.
    4. Create each job in a savepoint: a DuplicateJob or a Conflict refuses
       that finding only, so a repeated request creates nothing twice.
    """
    approver_require(user)
    ids = bulk_ids(finding_ids, verb="approve")
    if kind not in RemediationJob.Kind.values:
        raise ValidationError(f"unknown remediation kind {kind!r}: reset or backfill")
    if not settings.FOUR_EYES:
        dispatch.queue_check()
    jobs: list[tuple[int, RemediationJob]] = []
    refused: list[tuple[int, str]] = []
    with transaction.atomic():
        findings_lock(Finding.objects.filter(id__in=ids))
        for plan in findings_bulk_preview(finding_ids=ids, kind=kind, user=user):
            if plan.refused:
                refused.append((plan.finding_id, plan.refused))
                continue
            try:
                jobs.append((plan.finding_id, job_request_previewed(
                    user=user, kind=kind, preview=plan.preview,
                    previewed=None if previewed is None else previewed.get(plan.finding_id, ""))))
            except ChangedSincePreview:
                refused.append((plan.finding_id, CHANGED_SINCE_PREVIEW))
            except (Conflict, OutOfScope) as error:
                refused.append((plan.finding_id, str(error)))
    return BulkApproval(jobs=tuple(jobs), refused=tuple(refused))
