"""Gapwatch's commits as a member of a group (issue 43), recorded: the
``Protection`` rows the detection core decides a group's findings from, and
their audit. Written by an expansion's job and by the standing protection."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from groups.models import Cluster, ExpansionJob, Protection, RepairRule
from groups.services.audit import audit_record


def protections_record(*, cluster: Cluster, group_id: str, topic: str, kafka_topic_id: str,
                       commits: dict[int, dict], expansion: ExpansionJob | None = None,
                       rule: RepairRule | None = None) -> None:
    """One ``Protection`` per partition of ``commits`` (partition ->
    {"offset", "won", "words"}), replacing an earlier one of the same
    partition, in one transaction; audited as ``protection.committed`` when
    a standing rule made them (an expansion audits its own step)."""
    with transaction.atomic():
        for partition, commit in commits.items():
            Protection.objects.update_or_create(
                cluster=cluster, group_id=group_id, topic=topic, kafka_topic_id=kafka_topic_id, partition=partition,
                defaults={"offset": commit["offset"], "won": commit["won"], "words": commit["words"],
                          "expansion": expansion, "rule": rule, "made_at": timezone.now()})
        if rule is not None:
            audit_record(action="protection.committed", cluster=cluster, object_type="repair_rule",
                         object_id=rule.id, detail={"group": group_id, "topic": topic, "rule": rule.name,
                                                    "partitions": {str(p): c for p, c in commits.items()}})
