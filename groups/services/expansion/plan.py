"""An expansion's plan (issue 33, item 1): what adding partitions to a topic
would do to every group that reads it, and the broker's own verdict, before
anything changes. Only planned so far: nothing here writes a row or changes
the cluster (the broker is asked with validate_only).

The pages, the API and the command line show the same plan
(``expansion_plan_as_dict``); the page and the API ask a worker for the
broker's verdict (``gapwatch.validate_partitions``), the command asks the
broker itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from redis.exceptions import RedisError

from groups.domain.expansion.plan import (
    PROTECTION_LABELS,
    BrokerVerdict,
    ExpansionPlan,
    partitions_problem,
    plan_expansion,
)
from groups.domain.expansion.job import plan_fingerprint
from groups.domain.scopes import VIEWER
from groups.models import Cluster, GroupTopic, Topic
from groups.selectors.access import scope_of
from groups.selectors.expansion import RateSamples, expansion_readers, topic_facts
from groups.services.dispatch import VALIDATE_PARTITIONS, QueueUnavailable, TaskTimedOut, task_answer
from groups.services.redis_client import redis_client

# How long a page or the API waits for the worker's CreatePartitions (validate_only), and how long
# its answer is kept for the request that follows the plan.
VERDICT_WAIT_SECONDS = 30.0
VERDICT_KEEP_SECONDS = 120
NOT_YET = ("a plan is asked with \"dry_run\": true; the expansion itself with \"dry_run\": false and the "
           "plan's \"fingerprint\" (then a second approver approves it); nothing was changed or stored")

Verdict = Callable[[Cluster, str, int], BrokerVerdict]


class ExpansionNotFound(LookupError):
    """No such cluster, or no such topic on it that the person may read."""


@dataclass(frozen=True)
class PlannedExpansion:
    cluster: str
    plan: ExpansionPlan
    samples: RateSamples
    # Groups reading the topic that the person's scope does not show: the plan
    # is complete only when this is 0.
    groups_outside_scope: int = 0


def _verdict_key(cluster: Cluster, topic: str, count: int) -> str:
    """One cluster row (its id and creation time: a database made anew reuses ids), topic and count."""
    name = hashlib.sha256(f"{cluster.created_at.isoformat()}\x00{topic}".encode()).hexdigest()
    return f"gapwatch:broker-verdict:{cluster.id}:{name}:{count}"


def _verdict_from_worker(cluster: Cluster, topic: str, count: int) -> BrokerVerdict:
    """The broker's verdict, asked by a worker; kept VERDICT_KEEP_SECONDS, so
    the request that follows a plan shown a moment ago waits on no worker
    (the job's first step asks the broker again before anything changes)."""
    key = _verdict_key(cluster, topic, count)
    try:
        kept = redis_client().get(key)
    except RedisError:
        kept = None
    if kept is not None:
        return BrokerVerdict(**json.loads(kept))
    try:
        answer = task_answer(name=VALIDATE_PARTITIONS, args=(cluster.id, topic, count), timeout=VERDICT_WAIT_SECONDS)
    except (QueueUnavailable, TaskTimedOut) as error:
        return BrokerVerdict(accepted=False, asked=False, reason=f"the broker could not be asked: {error}")
    verdict = BrokerVerdict(accepted=bool(answer["accepted"]), reason=str(answer["reason"]), asked=bool(answer["asked"]))
    try:
        redis_client().set(key, json.dumps(dataclasses.asdict(verdict)), ex=VERDICT_KEEP_SECONDS)
    except RedisError:
        pass  # asked again next time
    return verdict


def expansion_plan_of(*, cluster: Cluster, topic: Topic, partitions: object, verdict: Verdict,
                      readers: QuerySet[GroupTopic] | None = None, groups_outside_scope: int = 0) -> PlannedExpansion:
    """The plan of raising ``topic`` to ``partitions``: ValidationError when
    that is no new count (as of the last poll); otherwise the broker's
    ``verdict`` and the plan of every group in ``readers`` (default: all)."""
    problem = partitions_problem(current=topic.partition_count, requested=partitions)
    if problem:
        raise ValidationError(problem)
    facts, samples = topic_facts(topic=topic)
    plan = plan_expansion(
        topic=facts, new_partitions=partitions,
        readers=expansion_readers(topic=topic, readers=readers if readers is not None else GroupTopic.objects.all()),
        verdict=verdict(cluster, topic.name, partitions),
        metadata_version=(cluster.kafka_features or {}).get("metadata_version", ""),
        anchor_topic=settings.PROTECT_ANCHOR_TOPIC,
    )
    return PlannedExpansion(cluster=cluster.name, plan=plan, samples=samples, groups_outside_scope=groups_outside_scope)


def expansion_plan(*, user, cluster: object, topic: object, partitions: object, dry_run: object,
                   verdict: Verdict | None = None) -> PlannedExpansion:
    """The plan for a person (the page and the API).

    1. Only a dry run: anything else is refused (NOT_YET), before anything is read.
    2. The viewer role; the topic must be one the person's scope reads
       (ExpansionNotFound otherwise, as for a topic that does not exist).
    3. Only the groups their scope shows are planned; the others are counted.
    4. The broker's verdict from ``verdict``, by default a worker's answer.
    Raises PermissionDenied, ExpansionNotFound, ValidationError.
    """
    if dry_run is not True:
        raise ValidationError(NOT_YET)
    scope = scope_of(user)
    if not scope.grants:
        raise PermissionDenied("planning an expansion needs the viewer role")
    for name, value in (("cluster", cluster), ("topic", topic)):
        if not isinstance(value, str) or not value or "\x00" in value:
            raise ValidationError(f"{name} must be a name (text without NUL bytes)")
    row = Topic.objects.select_related("cluster").filter(cluster__name=cluster, name=topic, deleted=False).first()
    if row is None or scope.may(VIEWER, cluster=cluster, topic=topic) is None:
        raise ExpansionNotFound(f"no topic {topic!r} on cluster {cluster!r} that you may read")
    readers = GroupTopic.objects.filter(topic=row, group__present=True)
    shown = scope.rows(readers, cluster="topic__cluster__name", group="group__group_id", topic="topic__name")
    return expansion_plan_of(cluster=row.cluster, topic=row, partitions=partitions,
                             verdict=verdict or _verdict_from_worker, readers=shown,
                             groups_outside_scope=readers.count() - shown.count())


def expansion_plan_as_dict(planned: PlannedExpansion) -> dict:
    """The plan as the API answers it and ``plan_expansion --json`` prints it."""
    plan, samples = planned.plan, planned.samples
    rate = None
    if plan.rate is not None:
        rate = {
            "offsets_per_second": round(plan.rate.per_second, 3), "offsets": plan.rate.offsets,
            "seconds": round(plan.rate.seconds, 3),
            "measured_from": samples.measured_from.isoformat() if samples.measured_from else None,
            "measured_until": samples.measured_until.isoformat() if samples.measured_until else None,
        }
    shown = {
        "dry_run": True,
        "changed": "nothing: a plan only; the broker was asked with validate_only",
        "cluster": planned.cluster,
        "topic": plan.topic,
        "current_partitions": plan.current_partitions,
        "new_partitions": plan.new_partitions,
        "added_partitions": list(plan.added_partitions),
        "produce_rate": rate,
        "broker_verdict": {"accepted": plan.verdict.accepted, "asked": plan.verdict.asked,
                           "reason": plan.verdict.reason},
        "counts": plan.counts(),
        "groups_outside_scope": planned.groups_outside_scope,
        "groups": [
            {
                "group": g.group_id, "kind": g.kind, "protocol": g.protocol, "state": g.state, "members": g.members,
                "policy": g.policy, "policy_source": g.policy_source,
                "policy_source_label": g.policy_source_label, "policy_words": g.policy_words,
                "outcome": g.outcome, "outcome_label": g.outcome_label, "reason": g.reason,
                "sink": g.sink or None,
                "protection": g.protection or None,
                "protection_label": PROTECTION_LABELS.get(g.protection),
                "cost": g.cost or None, "needs": g.needs or None, "alternative": g.alternative or None,
                "expected_missed": {"estimate": True, "low": g.expected_missed.low, "high": g.expected_missed.high,
                                    "words": g.expected_missed.words},
            }
            for g in plan.groups
        ],
    }
    # What approving this plan approves (the decisions, not the moving rate and estimates).
    return {**shown, "fingerprint": plan_fingerprint(shown)}
