"""Standing repair rules (issue 33, item 5): written by a person who may
manage clusters, applied after every poll (full or the watcher's) by
``standing_rules_apply``. The decision is the pure core's
(``groups.domain.standing_rules``); the backfill is planned by the same
preview a person sees and queued by the one writer of repairs approved in
advance (``preapproved.queue_preapproved_backfill``, an expansion's too),
audited as the rule's. A finding is acted on once (``RuleRepair``): queued,
or left to a person with the reason.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from groups.domain.replay_topics import replay_topic_problem
from groups.domain.sinks import HANDLER, JOB_SINKS, KAFKA
from groups.domain.standing_rules import StandingRule, rule_decision, rule_for
from groups.models import Finding, RepairRule, RuleRepair
from groups.services.audit import audit_record
from groups.services.clusters import require_manager
from groups.services.dispatch import QueueUnavailable
from groups.services.preapproved import queue_preapproved_backfill
from groups.services.previews import backfill_preview

log = logging.getLogger(__name__)

SOURCE_RULE = "standing-rule"


def rule_problems(rule: RepairRule) -> dict[str, str]:
    """Field -> what is wrong with the rule's sink, before it is saved."""
    problems = {}
    if rule.sink not in JOB_SINKS:
        problems["sink"] = f"unknown sink {rule.sink!r}: use {', '.join(JOB_SINKS)}"
    if rule.sink == HANDLER and rule.handler not in settings.BACKFILL_HANDLERS:
        problems["handler"] = "a handler sink needs one of BACKFILL_HANDLERS"
    if rule.sink == KAFKA and rule.replay_topic:
        problem = replay_topic_problem(rule.replay_topic, sources=(), existing=(), configured=rule.replay_topic)
        if problem:
            problems["replay_topic"] = problem
    if rule.max_records is None or rule.max_records < 1:
        problems["max_records"] = "at least one record"
    return problems


def _detail(rule: RepairRule) -> dict:
    return {"name": rule.name, "topics": rule.topic_pattern, "groups": rule.group_pattern, "action": rule.action,
            "sink": rule.sink,
            "replay_topic": rule.replay_topic, "handler": rule.handler, "max_records": rule.max_records,
            "enabled": rule.enabled}


def rule_save(*, rule: RepairRule, by) -> RepairRule:
    """Create or change a rule, audited: it approves repairs in advance, so
    only someone who may manage every cluster writes one."""
    require_manager(by)
    problems = rule_problems(rule)
    if problems:
        raise ValidationError(problems)
    with transaction.atomic():
        created = rule.pk is None
        if created:
            rule.created_by = by
        rule.save()
        audit_record(action="repair_rule.created" if created else "repair_rule.changed", actor=by,
                     cluster=rule.cluster, object_type="repair_rule", object_id=rule.pk, detail=_detail(rule))
    return rule


def rule_delete(*, rule: RepairRule, by) -> None:
    require_manager(by)
    with transaction.atomic():
        audit_record(action="repair_rule.deleted", actor=by, cluster=rule.cluster, object_type="repair_rule",
                     object_id=rule.pk, detail=_detail(rule))
        rule.delete()


def standing_rules_apply(*, cluster_id: int) -> list[int]:
    """Every open, decided finding of the cluster that an enabled rule covers
    and that no rule acted on yet: the rule's backfill of the sound range,
    queued (or, past its maximum, left to a person, once). Returns the ids
    of the jobs queued. A queue that does not answer leaves the finding for
    the next poll; a job already active on it (a person's) is left alone."""
    rows = {row.id: row for row in RepairRule.objects.filter(cluster_id=cluster_id, enabled=True)}
    if not rows:
        return []
    rules = [StandingRule(id=r.id, name=r.name, topic_pattern=r.topic_pattern, group_pattern=r.group_pattern,
                          max_records=r.max_records) for r in rows.values()]
    findings = (Finding.objects.filter(cluster_id=cluster_id, closed_at__isnull=True, state=Finding.State.GAP,
                                       backfill_end__isnull=False,
                                       rule_repair__isnull=True)
                .exclude(job_findings__active=True).select_related("cluster", "group", "topic").order_by("id"))
    queued = []
    for finding in findings:
        rule = rule_for(rules, topic=finding.topic.name, group=finding.group.group_id)
        if rule is None:
            continue
        row = rows[rule.id]
        try:
            preview = backfill_preview(finding_ids=[finding.id], sink=row.sink, replay_topic=row.replay_topic,
                                       handler=row.handler)
        except ValidationError as error:
            RuleRepair.objects.create(rule=row, finding=finding, refused="; ".join(error.messages))
            continue
        decision = rule_decision(rule, state=finding.state, bound_end=finding.backfill_end,
                                 offsets=preview["total"], records=preview["records"])
        if decision.decision in ("wait", "none"):
            continue
        try:
            with transaction.atomic():
                # The one way a repair approved in advance is queued (or left to a person, audited).
                job, why = queue_preapproved_backfill(
                    finding=finding, sink=row.sink, sink_params={"replay_topic": row.replay_topic,
                                                                 "handler": row.handler},
                    max_records=row.max_records, origin=f"{SOURCE_RULE} {row.name}", params={"rule": row.id},
                    preview=preview)  # planned once, above: the rule's decision and the job see one plan
                RuleRepair.objects.create(rule=row, finding=finding, job=job, refused="" if job else why)
        except QueueUnavailable as error:
            log.info("rule %s left finding %s for the next poll: %s", row.name, finding.id, error)
            continue
        if job is not None:
            queued.append(job.id)
    return queued
