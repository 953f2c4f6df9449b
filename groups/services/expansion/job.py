"""Writes of a guarded expansion (issue 33, items 2 to 4): the request that
stores the plan as shown, its approval by a second person (the plan re-made
and compared), and what the job records as it runs (each step, each group's
protection and repair, the verdicts at the end).

Every status move is a compare-and-set (``job_status.job_status_move``);
every step leaves an audit row. The job itself runs in
``tasks/expansion/run.py``.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from groups.domain.expansion.plan import BrokerVerdict, sink_problem
from groups.domain.reasons import system_text
from groups.models import ConsumerGroup, ExpansionJob, Topic
from groups.services import dispatch
from groups.services.access import act_detail, approval_refusal, approval_require, approver_require
from groups.services.audit import audit_record
from groups.services.expansion.plan import Verdict, expansion_plan, expansion_plan_as_dict
from groups.services.job_status import job_status_move
from groups.services.lifecycle import Conflict, reason_require
from groups.services.notifications import notifications_create
from groups.services.protections import protections_record

Status = ExpansionJob.Status
# Group outcomes whose repair the request chooses (a protected empty group falls back to its repair
# when a member returns before the commit).
REPAIRABLE = ("repaired_after", "protected_before")


class ExpansionJobNotFound(LookupError):
    """No such expansion job that the person may see."""


def _expansion_for(user, job_id: int, *, doing: str) -> ExpansionJob:
    """The job, if its topic is in the person's approver scope (else not shown to exist)."""
    job = ExpansionJob.objects.select_related("cluster", "topic", "requested_by").filter(id=job_id).first()
    if job is None or approval_refusal(user, what="an expansion", cluster=job.cluster.name, topics=[job.topic.name]):
        raise ExpansionJobNotFound(f"no expansion {job_id} that you may {doing}")
    return job


def _require_whole_scope(user, planned) -> None:
    """The person must be allowed to act on the topic and see every group the plan covers."""
    plan = planned.plan
    approval_require(user, what="an expansion", cluster=planned.cluster, topics=[plan.topic])
    if planned.groups_outside_scope:
        raise PermissionDenied(f"{planned.groups_outside_scope} group(s) reading {plan.topic!r} are outside your "
                               "scope: the plan you approve must show every group it changes")


def _action_outcome(group_id: str, g: dict, action: object) -> str:
    """The outcome the person chose for a group (``action``: "protect", "repair_after" or
    "nothing"; None: the plan's). A group protected by membership may be repaired after instead,
    or left alone; a group repaired after may be left alone; any other keeps the plan's outcome."""
    if action is None:
        return g["outcome"]
    choices = {"protect": "protected_before", "repair_after": "repaired_after", "nothing": "left_alone"}
    allowed = (("protect", "repair_after", "nothing") if g.get("protection") == "membership" else
               ("repair_after", "nothing") if g["outcome"] == "repaired_after" else ())
    if not isinstance(action, str) or action not in allowed:
        offered = f"one of {', '.join(allowed)}" if allowed else f"none: it is {g['outcome'].replace('_', ' ')}"
        raise ValidationError(f"repairs[{group_id!r}].action must be {offered}, got {action!r}")
    return choices[action]


def _repair_choices(*, plan_dict: dict, topic: Topic, repairs: object) -> dict[str, dict]:
    """Each group's decision as stored: its outcome (the plan's, or the one
    the person chose: ``action``), how it is protected (``method``), and, for
    a group repaired after (or protected, falling back to a repair), the
    sink and the most offsets its backfill may replay by itself. ``repairs``:
    {group id: {"action", "sink", "replay_topic", "handler", "max_records"}}
    from the request; a group not named gets the plan's outcome, its own
    default sink and the plan's high estimate. A group repaired after with no
    maximum (none given and no estimate: no produce rate yet) would end "left
    for a person": refused, naming every such group. ValidationError names
    what is wrong; nothing is written."""
    if repairs is None:
        repairs = {}
    if not isinstance(repairs, dict):
        raise ValidationError("repairs must be an object of group id to {action, sink, max_records}")
    known = {g["group"]: g for g in plan_dict["groups"]}
    unknown = sorted(set(repairs) - set(known))
    if unknown:
        raise ValidationError(f"repairs names group(s) the plan does not have: {unknown[:5]!r}")
    rows = {g.group_id: g for g in ConsumerGroup.objects.filter(cluster_id=topic.cluster_id, group_id__in=list(known))}
    existing = set(Topic.objects.filter(cluster_id=topic.cluster_id, deleted=False).values_list("name", flat=True))
    decisions, unbounded = {}, []
    for group_id, g in known.items():
        choice = repairs.get(group_id) or {}
        if not isinstance(choice, dict):
            raise ValidationError(f"repairs[{group_id!r}] must be an object")
        outcome = _action_outcome(group_id, g, choice.get("action"))
        decision = {"outcome": outcome, "kind": g["kind"], "reason": g["reason"],
                    "method": g.get("protection") if outcome == "protected_before" else None}
        if outcome != g["outcome"]:
            decision["chosen"] = f"{g['outcome'].replace('_', ' ')} in the plan; {outcome.replace('_', ' ')} chosen"
        if outcome in REPAIRABLE and g["kind"] != "share" and group_id in rows:
            row = rows[group_id]
            sink = choice.get("sink") or g.get("sink") or row.backfill_sink
            replay_topic = choice.get("replay_topic", "") or row.replay_topic
            handler = choice.get("handler", "")
            if not all(isinstance(v, str) for v in (sink, replay_topic, handler)):
                raise ValidationError(f"repairs[{group_id!r}]: sink, replay_topic and handler must be text")
            maximum = choice.get("max_records", (g.get("expected_missed") or {}).get("high"))
            if maximum is not None and (isinstance(maximum, bool) or not isinstance(maximum, int) or maximum < 0):
                raise ValidationError(f"repairs[{group_id!r}].max_records must be a whole number, 0 or more")
            problem = sink_problem(sink=sink, replay_topic=replay_topic, topic=topic.name, existing_topics=existing)
            if problem and (outcome == "repaired_after" or choice.get("sink") or choice.get("replay_topic")):
                raise ValidationError(f"group {group_id!r}: its sink {sink!r} cannot take the repair: {problem}")
            if maximum is None and outcome == "repaired_after":
                unbounded.append(group_id)
            decision.update(sink="" if problem else sink, sink_params={"replay_topic": replay_topic,
                                                                        "handler": handler},
                            max_records=maximum, sink_problem=problem)
        decisions[group_id] = decision
    if unbounded:
        raise ValidationError(
            f"no maximum for the repair of {len(unbounded)} group(s) repaired after: {sorted(unbounded)[:5]!r}: the "
            "plan has no estimate yet (no produce rate measured), so every repair would wait for a person; give "
            "each a max_records (0 or more), or choose \"protect\" or \"nothing\" for it; nothing was stored")
    return decisions


def expansion_request(*, user, cluster: object, topic: object, partitions: object, fingerprint: object,
                      repairs: object = None, verdict: Verdict | None = None) -> ExpansionJob:
    """A person asks for the expansion they saw planned: stored ``requested``,
    waiting for an approval.

    1. The approver role on the topic, and a scope that shows every group.
    2. The plan re-made now (the broker asked with validate_only) must be the
       one shown: ``fingerprint`` is the dry run's; another is a Conflict.
    3. The broker must accept the count; its refusal is a ValidationError.
    4. The repairs chosen (sink, maximum) are checked; one active expansion
       per topic (a repeated request is a Conflict naming the first).
    Nothing is written unless every check passes."""
    approver_require(user, doing="adding partitions")
    planned = expansion_plan(user=user, cluster=cluster, topic=topic, partitions=partitions, dry_run=True,
                             verdict=verdict)
    _require_whole_scope(user, planned)
    plan_dict = expansion_plan_as_dict(planned)
    if not isinstance(fingerprint, str) or not fingerprint:
        raise ValidationError("send the fingerprint of the plan you saw (the dry run's \"fingerprint\")")
    if fingerprint != plan_dict["fingerprint"]:
        raise Conflict("the plan changed since you saw it (a group's outcome, the partitions or the broker's "
                       "verdict): nothing was stored; look at the plan again")
    if not planned.plan.verdict.accepted:
        raise ValidationError(f"the broker refuses this expansion: {planned.plan.verdict.reason}; nothing was "
                              "stored or changed")
    row = Topic.objects.get(cluster__name=planned.cluster, name=planned.plan.topic, deleted=False)
    decisions = _repair_choices(plan_dict=plan_dict, topic=row, repairs=repairs)
    try:
        with transaction.atomic():
            job = ExpansionJob.objects.create(
                cluster=row.cluster, topic=row, from_partitions=planned.plan.current_partitions,
                to_partitions=planned.plan.new_partitions, plan=plan_dict, plan_fingerprint=plan_dict["fingerprint"],
                decisions=decisions, status=Status.REQUESTED, requested_by=user)
            audit_record(action="expansion.requested", actor=user, cluster=row.cluster, object_type="expansion",
                         object_id=job.id, detail={"topic": row.name, "from": job.from_partitions,
                                                   "to": job.to_partitions, "fingerprint": job.plan_fingerprint,
                                                   "counts": plan_dict["counts"], **act_detail(user)})
    except IntegrityError:
        active = ExpansionJob.objects.filter(topic=row, status__in=ExpansionJob.ACTIVE).first()
        if active is None:
            raise
        raise Conflict(f"expansion {active.id} of {row.name!r} is already {active.status}: one at a time") from None
    return job


def expansion_approve(*, user, job_id: int, fingerprint: object = None,
                      verdict: Verdict | None = None) -> ExpansionJob:
    """Another approver approves the job: the plan is made again now, from
    stored state, and must fingerprint as the one requested (and as the one
    the approver saw, when ``fingerprint`` is sent); then ``approved`` and the
    job is enqueued. The broker's verdict is the one the request was given
    (``verdict`` None): approving waits on no worker, and the job's first step
    asks the broker again before anything changes (issue 42).
    PermissionDenied (role, scope, the requester themselves under FOUR_EYES),
    Conflict (not waiting, or the plan changed), nothing written otherwise."""
    approver_require(user, doing="adding partitions")
    job = _expansion_for(user, job_id, doing="approve")
    approval_require(user, what="an expansion", cluster=job.cluster.name, topics=[job.topic.name],
                     requested_by=job.requested_by)
    if job.status != Status.REQUESTED:
        raise Conflict(f"expansion {job_id} is {job.status}, not waiting for approval")
    if fingerprint is not None and fingerprint != job.plan_fingerprint:
        raise Conflict("the plan you saw is not the plan requested: nothing was approved")
    stored = job.plan.get("broker_verdict") or {}
    planned = expansion_plan(user=user, cluster=job.cluster.name, topic=job.topic.name,
                             partitions=job.to_partitions, dry_run=True,
                             verdict=verdict or (lambda cluster, topic, count: BrokerVerdict(
                                 accepted=bool(stored.get("accepted")), reason=str(stored.get("reason", "")),
                                 asked=bool(stored.get("asked", True)))))
    _require_whole_scope(user, planned)
    now_plan = expansion_plan_as_dict(planned)
    if now_plan["fingerprint"] != job.plan_fingerprint:
        raise Conflict("the plan changed since it was requested (a group's outcome, a group that came or went, "
                       "or the broker's verdict): nothing was approved; request the expansion again")
    dispatch.queue_check()
    with transaction.atomic():
        if not job_status_move(model=ExpansionJob, job_id=job_id, from_statuses=[Status.REQUESTED],
                               to_status=Status.APPROVED, actor=user,
                               detail={"topic": job.topic.name, "fingerprint": job.plan_fingerprint,
                                       **act_detail(user)},
                               approved_by=user, approved_at=timezone.now()):
            raise Conflict(f"expansion {job_id} was approved or refused by someone else meanwhile")
        dispatch.task_enqueue_on_commit(dispatch.RUN_EXPANSION_JOB, job_id)
    return ExpansionJob.objects.get(id=job_id)


def expansion_refuse(*, user, job_id: int, reason: str) -> ExpansionJob:
    """An approver refuses a requested expansion (the requester may withdraw
    it): nothing was changed on the cluster, and the topic is free again."""
    approver_require(user, doing="adding partitions")
    reason = reason_require(reason, what="a refusal")
    _expansion_for(user, job_id, doing="refuse")
    if not job_status_move(model=ExpansionJob, job_id=job_id, from_statuses=[Status.REQUESTED],
                           to_status=Status.REFUSED, actor=user, detail={"reason": reason, **act_detail(user)},
                           status_reason=f"refused by {user.get_username()}: {reason}"):
        raise Conflict(f"expansion {job_id} is {ExpansionJob.objects.get(id=job_id).status}: only a requested "
                       "expansion can be refused")
    return ExpansionJob.objects.get(id=job_id)


# --- What the running job records -----------------------------------------------------------


def expansion_start(*, job_id: int) -> bool:
    """approved → running (compare-and-set); True when the job is running now
    (started here, or resumed after a worker's death)."""
    job_status_move(model=ExpansionJob, job_id=job_id, from_statuses=[Status.APPROVED], to_status=Status.RUNNING,
                    detail=lambda job: {"topic_id": job.topic_id})
    return ExpansionJob.objects.filter(id=job_id, status=Status.RUNNING).exists()


def _locked_running(job_id: int) -> ExpansionJob | None:
    return ExpansionJob.objects.select_for_update().select_related("cluster").filter(
        id=job_id, status=Status.RUNNING).first()


def expansion_record_step(*, job_id: int, step: str, detail: dict) -> bool:
    """Step ``step`` is done, with what it found: written before the next
    step starts, so a re-run continues after it. False when the job is no
    longer running (nothing written)."""
    with transaction.atomic():
        job = _locked_running(job_id)
        if job is None:
            return False
        job.steps = {**job.steps, step: {"done_at": timezone.now().isoformat(), "detail": detail}}
        job.status_reason, job.attempts = "", 0
        job.save(update_fields=["steps", "status_reason", "attempts", "updated_at"])
        audit_record(action=f"expansion.{step}", cluster=job.cluster, object_type="expansion", object_id=job_id,
                     detail=detail)
    return True


def expansion_record_decision(*, job_id: int, group_id: str, audit: str = "", **changes) -> bool:
    """Merge ``changes`` into one group's decision (a protection's previous
    value, that it was applied or undone, a fallback, a backfill queued),
    committed before the action it prepares or after the one it records.
    ``audit``: the action's name, when the change is one."""
    with transaction.atomic():
        job = _locked_running(job_id)
        if job is None:
            return False
        decision = dict(job.decisions.get(group_id, {}))
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(decision.get(key), dict):
                decision[key] = {**decision[key], **value}
            else:
                decision[key] = value
        job.decisions = {**job.decisions, group_id: decision}
        job.save(update_fields=["decisions", "updated_at"])
        if audit:
            audit_record(action=f"expansion.{audit}", cluster=job.cluster, object_type="expansion",
                         object_id=job_id, detail={"group": group_id, **changes})
    return True


def expansion_record_protection(*, job_id: int, group_id: str, commits: dict[int, dict]) -> bool:
    """What protecting one group by membership did on each new partition
    (``commits``: partition -> {"offset", "won", "words"}), in one
    transaction: the group's decision (``membership.partitions``, audited as
    ``expansion.committed``) and a ``Protection`` row per partition, which the
    detection core decides the group's findings on those partitions from."""
    with transaction.atomic():
        job = _locked_running(job_id)
        if job is None:
            return False
        protections_record(cluster=job.cluster, group_id=group_id, topic=job.topic.name,
                           kafka_topic_id=job.topic.kafka_topic_id, commits=commits, expansion=job)
        expansion_record_decision(job_id=job_id, group_id=group_id, audit="committed",
                                  membership={"partitions": {str(p): c for p, c in commits.items()}})
    return True


def expansion_record_reason(*, job_id: int, reason: str) -> None:
    """What the running job waits for, in words."""
    ExpansionJob.objects.filter(id=job_id, status=Status.RUNNING).update(status_reason=system_text(reason),
                                                                        updated_at=timezone.now())


def expansion_record_attempt(*, job_id: int, reason: str) -> int:
    """One more run found the broker away at the current step (said in
    ``reason``); the count so far (0 when the job is no longer running)."""
    ExpansionJob.objects.filter(id=job_id, status=Status.RUNNING).update(
        status_reason=system_text(reason), attempts=F("attempts") + 1, updated_at=timezone.now())
    return ExpansionJob.objects.filter(id=job_id, status=Status.RUNNING).values_list("attempts", flat=True).first() or 0


def expansion_pass_run(*, job_id: int, token: str | None, to: str) -> bool:
    """Hand the job's next run to the message carrying ``to`` (compare-and-set
    on the current token: ``token`` None takes the job over from any chain,
    as approval and recovery do). False when another chain holds it, or the
    job is no longer running."""
    running = ExpansionJob.objects.filter(id=job_id, status=Status.RUNNING)
    if token is not None:
        running = running.filter(run_token=token)
    return bool(running.update(run_token=to, updated_at=timezone.now()))


def expansion_holds_run(*, job_id: int, token: str | None) -> bool:
    """Whether a run carrying ``token`` may work on the job: a fresh start
    (None) may; a chain's message only while its token is the current one."""
    return token is None or ExpansionJob.objects.filter(id=job_id, run_token=token).exists()


def expansion_finish(*, job_id: int, status: str, verdicts: dict[str, dict], error: str = "") -> bool:
    """running → succeeded, succeeded_with_loss or failed (any other end is a
    ValueError: the table of ``groups.domain.job_states``), with the verdict
    of every group (a failed job's say what it left undone); audited, and the
    cluster's webhook told (one ``expansion.finished`` event)."""
    error = system_text(error)

    def notify(job: ExpansionJob) -> None:
        notifications_create(cluster=job.cluster, events=[("expansion.finished", {
            "event": "expansion.finished", "cluster": job.cluster.name, "topic": job.topic.name,
            "expansion": job.id, "from": job.from_partitions, "to": job.to_partitions, "status": status,
            "error": error, "groups": verdicts}, None)])

    return job_status_move(model=ExpansionJob, job_id=job_id, from_statuses=[Status.RUNNING], to_status=status,
                           detail={"verdicts": verdicts, **({"error": error} if error else {})},
                           after=notify, verdicts=verdicts, error=error, status_reason="")
