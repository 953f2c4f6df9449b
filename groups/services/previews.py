"""What a remediation would do, planned from stored state (no Kafka call):
the preview a person sees before approving, whose ``params`` and ``plan``
the job then stores (``remediation.job_request_previewed``). Reads only."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from groups.domain.approval import approval_fingerprint, bulk_refusal
from groups.domain.planning import (
    PartitionPosition,
    PlanError,
    ResetTarget,
    backfill_recommended,
    plan_backfill_of_findings,
    plan_reset,
)
from groups.domain.read_isolation import (
    READ_UNCOMMITTED,
    RESET_ISOLATION_NOTE,
    backfill_isolation_note,
    reader_isolation,
)
from groups.domain.record_counts import group_records
from groups.domain.sinks import HANDLER, KAFKA, backfill_sink_for
from groups.domain.triage import GroupInfo, OpenFinding, group_is_empty, recommend
from groups.models import Finding, JobFinding, RemediationJob, Topic
from groups.services.lifecycle import Conflict, FindingNotFound, finding_require_open, missed_range_of
from groups.selectors.access import scope_of
from groups.selectors.finding import finding_counted_range
from groups.services.access import scope_refusal


def _open_findings_of_one_group(finding_ids: Iterable[int]) -> list[Finding]:
    ids = sorted(set(int(i) for i in finding_ids))
    if not ids:
        raise ValidationError("select at least one finding")
    rows = list(Finding.objects.filter(id__in=ids).select_related("cluster", "group", "topic"))
    missing = sorted(set(ids) - {f.id for f in rows})
    if missing:
        raise FindingNotFound(f"no finding {', '.join(map(str, missing))}")
    findings = rows
    for finding in findings:
        finding_require_open(finding)
    if len({(f.cluster_id, f.group_id) for f in findings}) != 1:
        raise ValidationError("a remediation covers findings of one group on one cluster")
    return findings


def positions_of(findings: list[Finding]) -> list[PartitionPosition]:
    """Offsets as of the last poll; the executor checks them again before acting."""
    return [
        PartitionPosition(topic=f.topic.name, partition=f.partition, log_start=f.log_start_offset,
                          high_watermark=f.high_watermark, committed=f.committed_offset)
        for f in findings
    ]


def reset_preview(*, finding_ids: Iterable[int], target_kind: str, target_value: str | None) -> dict:
    """What a reset would do, from stored state (no Kafka call): per partition
    current and planned offset, messages re-delivered or skipped, and whether
    the group was empty at the last poll. ``rows`` is the plan with each
    partition's missed (definite, possible) beside it, for the page; ``plan``
    stays what the job stores. ``backfill_recommended`` when the reset would
    re-deliver far more than was missed."""
    findings = _open_findings_of_one_group(finding_ids)
    try:
        target = ResetTarget.parse(kind=target_kind, value=target_value)
        target.require_not_future(now_ms=int(timezone.now().timestamp() * 1000))
        # A timestamp is resolved against the broker when the job runs.
        plan = [] if target.kind == "timestamp" else [
            p.as_dict() for p in plan_reset(target=target, positions=positions_of(findings))
        ]
    except PlanError as error:
        raise ValidationError(str(error)) from None
    group = findings[0].group
    missed = {(f.topic.name, f.partition): f for f in findings}
    rows = [{**row, "missed_definite": missed[row["topic"], row["partition"]].missed_definite,
             "missed_possible": missed[row["topic"], row["partition"]].missed_possible,
             "missed_records": _finding_records(missed[row["topic"], row["partition"]])} for row in plan]
    redelivered = sum(row["redelivered"] for row in plan)
    missed_at_most = sum(f.missed_definite + f.missed_possible for f in findings)
    return {
        "findings": findings, "group": group,
        "target": {"kind": target.kind, "value": target.value,
                   "at": datetime.fromtimestamp(target.value / 1000, UTC) if target.kind == "timestamp" else None},
        "params": {"target": target.kind, "value": target.value}, "plan": plan,
        "rows": rows, "redelivered": redelivered, "missed_at_most": missed_at_most,
        "backfill_recommended": backfill_recommended(redelivered=redelivered, missed_at_most=missed_at_most),
        "group_empty": group_is_empty(state=group.state, member_count=group.member_count),
        "isolation_note": RESET_ISOLATION_NOTE, "group_state": group.state, "member_count": group.member_count, "as_of": group.last_seen_at,
    }


def backfill_preview(
    *, finding_ids: Iterable[int], sink: str = "", replay_topic: str = "", handler: str = "", until: str = "bound",
) -> dict:
    """The plan of a backfill and where it delivers: ``params`` are what the
    job stores (the sink decided by ``backfill_sink_for``: without a sink, the
    group's default sink applies, for pages, API and retries alike; and
    ``until`` when it ends at the likely start). The plan ends at the sound
    bound unless ``until`` is "likely"; each row says how many of its records
    are certain losses and how many the group may already have read. The
    job reads with the group's isolation level, decided here like the sink
    (``params["isolation"]`` only when it is read_uncommitted: read_committed
    is what a job without it reads)."""
    findings = _open_findings_of_one_group(finding_ids)
    if not all(isinstance(value, str) for value in (replay_topic, handler, until)):
        raise ValidationError("replay_topic, handler and until must be text")
    group = findings[0].group
    sources = sorted({f.topic.name for f in findings})
    until = until or "bound"
    # Lazy: read only when a replay topic is checked.
    existing_topics = Topic.objects.filter(cluster=group.cluster_id, deleted=False).values_list("name", flat=True)
    try:
        chosen = backfill_sink_for(
            sink=sink, replay_topic=replay_topic, handler=handler, default_sink=group.backfill_sink,
            configured_replay_topic=group.replay_topic, handlers=settings.BACKFILL_HANDLERS, sources=sources,
            existing_topics=existing_topics,
        )
        planned = plan_backfill_of_findings(missed=[missed_range_of(f) for f in findings], until=until)
    except PlanError as error:
        raise ValidationError(str(error)) from None
    params = chosen.as_params()
    if until != "bound":
        params["until"] = until
    isolation = reader_isolation(group.declared_isolation)
    if isolation == READ_UNCOMMITTED:
        params["isolation"] = isolation
    if chosen.kind == KAFKA:
        destination = ", ".join(sorted(set(chosen.replay_topics(sources).values())))
    elif chosen.kind == HANDLER:
        destination = chosen.handler
    else:
        destination = f"{settings.BACKFILL_OUTPUT}/<job id>/"
    return {"findings": findings, "group": group, "sink": chosen.kind, "params": params, "destination": destination,
            "until": until, "isolation": isolation,
            "isolation_note": backfill_isolation_note(isolation=isolation, declared=group.declared_isolation),
            "likely_available": all(f.likely_start is not None for f in findings),
            "plan": [p.as_dict() for p in planned], "total": sum(p.range.count for p in planned),
            "total_definite": sum(p.definite for p in planned), "total_possible": sum(p.possible for p in planned),
            "records": _planned_records(findings, planned)}


def _finding_records(finding: Finding) -> int | None:
    """The records of the finding's missed range for its group, once counted from the log."""
    return group_records(isolation=finding.group.declared_isolation, counted=finding_counted_range(finding=finding),
                         start=finding.backfill_start, end=finding.backfill_end)


def _planned_records(findings: list[Finding], planned) -> int | None:
    """The records the plan's ranges hold for the group's isolation, counted
    from the log; None unless every planned range was counted as planned."""
    by_key = {(f.topic.name, f.partition): f for f in findings}
    total = 0
    for p in planned:
        finding = by_key.get((p.range.topic, p.range.partition))
        records = None if finding is None else group_records(
            isolation=finding.group.declared_isolation, counted=finding_counted_range(finding=finding),
            start=p.range.start, end=p.range.end)
        if records is None:
            return None
        total += records
    return total


def job_preview(*, finding_ids: Iterable[int], kind: str, params: dict) -> dict:
    """The preview of a job of ``kind`` from the values a person sent (pages,
    API and retries alike); its ``params`` are what the job would store.
    Bad input: ValidationError."""
    if kind == RemediationJob.Kind.RESET:
        return reset_preview(finding_ids=finding_ids, target_kind=params.get("target", "earliest"),
                             target_value=params.get("value"))
    if kind == RemediationJob.Kind.BACKFILL:
        return backfill_preview(finding_ids=finding_ids, sink=params.get("sink", ""),
                                replay_topic=params.get("replay_topic", ""), handler=params.get("handler", ""),
                                until=params.get("until", "bound"))
    raise ValidationError(f"unknown remediation kind {kind!r}")


# What a bulk approval asks of each finding: the repair the home page
# recommends, with the group's own defaults (its backfill sink).
BULK_PARAMS = {RemediationJob.Kind.RESET: {"target": "earliest"}, RemediationJob.Kind.BACKFILL: {}}


@dataclass(frozen=True)
class BulkPlan:
    """One finding of a bulk approval's preview: its own ``job_preview``
    and that preview's fingerprint, or why it is refused (``refused``)."""

    finding_id: int
    finding: Finding | None
    preview: dict | None
    fingerprint: str
    refused: str


def findings_bulk_preview(*, finding_ids: Iterable[int], kind: str, user=None) -> tuple[BulkPlan, ...]:
    """What a bulk approval of ``kind`` would do to each finding (of any
    groups and clusters), in id order: each planned on its own by
    ``job_preview``, exactly as its single approval would be, or refused
    with why (unknown, closed, covered, a job active on it, or what its own
    preview refuses). With ``user``: a finding their scope does not let
    them read is unknown, one it does not let them act on refused.
    Reads only; the caller has checked the ids."""
    if kind not in BULK_PARAMS:
        raise ValidationError(f"unknown remediation kind {kind!r}: reset or backfill")
    ids = sorted(set(finding_ids))
    rows = {f.id: f for f in Finding.objects.filter(id__in=ids).select_related("cluster", "group", "topic")}
    active = {link.finding_id: (link.job_id, link.job.kind, link.job.status)
              for link in JobFinding.objects.filter(finding_id__in=ids, active=True).select_related("job")}
    plans = []
    for finding_id in ids:
        finding = rows.get(finding_id)
        if finding is None or (user is not None and scope_of(user).may_read_finding(finding) is None):
            plans.append(BulkPlan(finding_id, None, None, "", "no such finding"))
            continue
        refused = (scope_refusal(user, finding) if user is not None else "") or bulk_refusal(state=finding.state, active_job=active.get(finding_id),
                               closed_reason=(finding.closed_reason or finding.resolution)
                               if finding.closed_at is not None else None)
        preview = None
        if not refused:
            preview, refused = _option_or_refusal(
                lambda finding_id=finding_id: job_preview(finding_ids=[finding_id], kind=kind,
                                                          params=dict(BULK_PARAMS[kind])))
        fingerprint = preview_fingerprint(kind=kind, preview=preview) if preview else ""
        plans.append(BulkPlan(finding_id, finding, preview, fingerprint, refused))
    return tuple(plans)


def preview_fingerprint(*, kind: str, preview: dict) -> str:
    """What a preview showed, as single and bulk approvals send it back
    (``groups.domain.approval.approval_fingerprint``)."""
    return approval_fingerprint(kind=kind, params=preview["params"], plan=preview["plan"], findings=[
        (f.id, f.state, f.missed_definite, f.missed_possible) for f in preview["findings"]])


def _option_or_refusal(plan) -> tuple[dict | None, str]:
    """A preview, or why it cannot be made (the reason a person would read on its page)."""
    try:
        return plan(), ""
    except (ValidationError, Conflict) as refused:
        return None, " ".join(refused.messages) if isinstance(refused, ValidationError) else str(refused)


def finding_repair_options(*, finding: Finding, active_job: int | None = None) -> dict:
    """What each repair of one open finding would do, from the same previews
    the reset and backfill pages show (no Kafka call), and the one the home
    page recommends (``groups.domain.triage.recommend``).

    ``options``: a reset to earliest (``delivers`` up to the missed records
    from the log start on, ``redelivers`` what the group already read), a
    backfill to the first commit (a bound) and, when a likely start is known,
    one to it (an estimate); each with ``definite`` and ``possible`` records,
    or ``refused`` saying why it cannot be planned now. Empty for a closed finding."""
    group = finding.group
    recommendation = recommend(
        group=GroupInfo(key=group.id, cluster=finding.cluster.name, group_id=group.group_id, state=group.state,
                        member_count=group.member_count),
        findings=[OpenFinding(
            id=finding.id, group_key=group.id, topic=finding.topic.name, partition=finding.partition,
            state=finding.state, missed_definite=finding.missed_definite, missed_possible=finding.missed_possible,
            log_start=finding.log_start_offset, high_watermark=finding.high_watermark,
            committed=finding.committed_offset, active_job=active_job)],
    )
    if finding.closed_at is not None:
        return {"recommendation": None, "options": []}
    options = []
    reset, refused = _option_or_refusal(
        lambda: reset_preview(finding_ids=[finding.id], target_kind="earliest", target_value=None))
    row = reset["rows"][0] if reset and reset["rows"] else {}
    options.append({
        "kind": "reset", "name": "Reset to earliest", "params": {"target": "earliest"}, "refused": refused,
        "start": row.get("planned"), "end": None,
        "delivers": finding.missed_definite + finding.missed_possible if reset else None,
        "definite": finding.missed_definite if reset else None,
        "possible": finding.missed_possible if reset else None,
        "redelivers": row.get("redelivered") if reset else None,
        "waits_for_empty_group": bool(reset) and not reset["group_empty"],
    })
    ends = [("bound", "Backfill to the first commit (a bound)")]
    if finding.likely_start is not None:
        ends.append(("likely", "Backfill to the likely start (an estimate)"))
    for until, name in ends:
        backfill, refused = _option_or_refusal(
            lambda until=until: backfill_preview(finding_ids=[finding.id], until=until))
        planned = backfill["plan"][0] if backfill else {}
        options.append({
            "kind": "backfill", "name": name, "params": {"until": until} if until != "bound" else {},
            "refused": refused, "start": planned.get("start"), "end": planned.get("end"),
            "delivers": planned.get("count"), "definite": planned.get("definite"),
            "possible": planned.get("possible"),
            # The possibly missed records are delivered again if the group did read them.
            "redelivers": planned.get("possible"), "waits_for_empty_group": False,
        })
    return {"recommendation": recommendation, "options": options}
