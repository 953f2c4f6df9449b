"""Backfills nobody clicks: a repair approved in advance (with an expansion's
plan, or by a standing rule) queued by itself once its finding is decided,
within the maximum approved, and audited as its origin. The one place that
decides it, for every caller."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from groups.domain.finding_states import MISSED_DECIDED
from groups.domain.preapproved import repair_within_maximum
from groups.models import Finding, RemediationJob
from groups.services.audit import audit_record
from groups.services.lifecycle import Conflict
from groups.services.previews import backfill_preview
from groups.services.remediation import DuplicateJob, job_create


class NotCountedYet(Exception):
    """More offsets than the maximum, and the range's records not counted yet
    (a poll counts them): the caller asks again later."""


def sound_range_offsets(finding: Finding) -> int:
    """Offsets of the finding's sound range (definitely and possibly missed)."""
    return finding.missed_definite + finding.missed_possible


def queue_preapproved_backfill(
    *, finding: Finding, sink: str, sink_params: dict, max_records: int | None, origin: str, actor=None,
    params: dict | None = None, preview: dict | None = None,
) -> tuple[RemediationJob | None, str]:
    """Queue the backfill of ``finding``'s sound range to ``sink``, approved
    in advance by ``origin`` (e.g. "expansion 7", "standing-rule payments"),
    if it replays at most ``max_records``: its records once counted from the
    log, else its offsets (never fewer). Returns the job (a new one, or the
    backfill already active on the finding), or None and why nothing was
    queued: over the maximum (left for a person, audited), a finding not
    decided or closed, a sink that cannot take it. Raises NotCountedYet
    while more offsets than the maximum wait for their record count
    (``preapproved.repair_within_maximum``, the one rule for every origin). ``params``: what the job
    stores besides (a rule's id); ``preview``: the finding's
    ``backfill_preview`` to that sink when the caller made it already.
    ``actor`` None: the system acted."""
    if finding.state not in MISSED_DECIDED or finding.closed_at is not None:
        return None, f"finding {finding.id} is {finding.resolution or finding.state}: nothing to queue"
    try:
        preview = preview or backfill_preview(finding_ids=[finding.id], sink=sink,
                                              replay_topic=sink_params.get("replay_topic", ""),
                                              handler=sink_params.get("handler", ""))
    except ValidationError as refused:
        return None, f"the backfill could not be queued: {' '.join(refused.messages)}"
    counted = preview["records"] is not None
    limit = repair_within_maximum(offsets=preview["total"], records=preview["records"], max_records=max_records,
                                  maximum=f"the {max_records} approved in advance ({origin})")
    if limit.decision == "wait":
        raise NotCountedYet(limit.reason)
    if limit.decision == "refuse":
        audit_record(action="backfill.left_for_a_person", actor=actor, cluster=finding.cluster,
                     object_type="finding", object_id=finding.id,
                     detail={"via": origin, "group": finding.group.group_id, "topic": finding.topic.name,
                             "partition": finding.partition,
                             "records" if counted else "offsets": preview["records"] if counted else preview["total"],
                             "max_records": max_records, "why": limit.reason})
        return None, limit.reason
    try:
        job = job_create(cluster=finding.cluster, group=finding.group, kind=RemediationJob.Kind.BACKFILL,
                         params={**preview["params"], **(params or {}), "source": origin}, plan=preview["plan"],
                         findings=preview["findings"], requested_by=actor, source=origin)
    except DuplicateJob as duplicate:
        return duplicate.job, ""
    except (ValidationError, Conflict) as refused:
        words = " ".join(refused.messages) if isinstance(refused, ValidationError) else str(refused)
        return None, f"the backfill could not be queued: {words}"
    return job, ""
