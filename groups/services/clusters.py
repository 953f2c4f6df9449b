"""Writes for clusters and consumer-group settings, for the pages and the
admin alike: each checks the permission, validates nothing the form did not
(the forms in ``groups.web.forms`` are the one validation), and writes one
audit row with before and after values (a password only as "changed")."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from groups.models import Cluster, ConsumerGroup
from groups.services import dispatch
from groups.services.audit import audit_record

MANAGE_PERMISSION = "groups.manage_clusters"
# The fields a person edits; what the audit compares before and after.
CLUSTER_FIELDS = ("name", "bootstrap_servers", "security_protocol", "sasl_mechanism", "sasl_username", "webhook_url")
GROUP_SETTINGS_FIELDS = ("declared_policy", "auto_repair", "backfill_sink", "replay_topic")
TEST_MESSAGE_MAX_CHARS = 1000


def require_manager(user) -> None:
    if not (user and user.is_authenticated and user.has_perm(MANAGE_PERMISSION)):
        raise PermissionDenied("changing clusters and group settings needs the approver role")


def _changes(before: dict, after: dict) -> tuple[dict, dict]:
    """Only the fields whose value changed, as (before, after)."""
    changed = [name for name in after if before.get(name) != after[name]]
    return {name: before.get(name) for name in changed}, {name: after[name] for name in changed}


def cluster_create(*, user, data: dict, password: str) -> Cluster:
    """Register a cluster; the audit row holds its settings and whether a password was given."""
    require_manager(user)
    with transaction.atomic():
        cluster = Cluster(**{name: data[name] for name in CLUSTER_FIELDS})
        cluster.set_sasl_password(password)
        cluster.save()
        audit_record(action="cluster.added", actor=user, cluster=cluster, object_type="cluster",
                     object_id=cluster.id, detail={"before": {}, "after": {name: data[name] for name in CLUSTER_FIELDS},
                                                   "password_set": bool(password)})
    return cluster


def cluster_update(*, user, cluster_id: int, data: dict, password: str, clear_password: bool) -> bool:
    """Change a cluster's settings. An empty ``password`` keeps the stored one.
    The audit row says only that the password changed, never what to.
    Returns False when nothing changed (and writes nothing)."""
    require_manager(user)
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        editable = [name for name in CLUSTER_FIELDS if name != "name"]
        before, after = _changes({name: getattr(cluster, name) for name in editable},
                                 {name: data[name] for name in editable if name in data})
        password_changed = bool(password) or (clear_password and cluster.has_sasl_password)
        if not after and not password_changed:
            return False
        for name, value in after.items():
            setattr(cluster, name, value)
        if password_changed:
            cluster.set_sasl_password("" if clear_password else password)
        cluster.save(update_fields=[*after, *(["sasl_password_encrypted"] if password_changed else [])])
        detail = {"before": before, "after": after}
        if password_changed:
            detail["password_changed"] = True
            detail["password_set"] = cluster.has_sasl_password
        audit_record(action="cluster.changed", actor=user, cluster=cluster, object_type="cluster",
                     object_id=cluster.id, detail=detail)
    return True


def cluster_register(*, data: dict, source: str) -> tuple[Cluster, bool]:
    """The system's idempotent registration (``manage.py register_cluster``):
    create the cluster, or update its bootstrap servers, from data the cluster
    form validated; audited as the system's, naming ``source``. Returns the
    cluster and whether it was created; nothing is written when nothing changed."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(name=data["name"]).first()
        if cluster is None:
            cluster = Cluster.objects.create(**{name: data[name] for name in CLUSTER_FIELDS if name in data})
            audit_record(action="cluster.added", actor=None, cluster=cluster, object_type="cluster",
                         object_id=cluster.id, detail={"before": {}, "after": {
                             name: data[name] for name in CLUSTER_FIELDS if name in data}, "via": source})
            return cluster, True
        before, after = _changes({"bootstrap_servers": cluster.bootstrap_servers},
                                 {"bootstrap_servers": data["bootstrap_servers"]})
        if after:
            Cluster.objects.filter(id=cluster.id).update(**after)
            audit_record(action="cluster.changed", actor=None, cluster=cluster, object_type="cluster",
                         object_id=cluster.id, detail={"before": before, "after": after, "via": source})
            cluster.refresh_from_db()
        return cluster, False


def cluster_record_test(*, cluster_id: int, ok: bool, message: str) -> None:
    """Store the result of a connection test on the cluster and audit it as the system's."""
    now, message = timezone.now(), message[:TEST_MESSAGE_MAX_CHARS]
    with transaction.atomic():
        updated = Cluster.objects.filter(id=cluster_id).update(last_test_at=now, last_test_ok=ok,
                                                               last_test_message=message)
        if updated:
            audit_record(action="cluster.tested", cluster=Cluster(id=cluster_id), object_type="cluster",
                         object_id=cluster_id, detail={"ok": ok, "message": message})


def cluster_set_enabled(*, user, cluster_id: int, enabled: bool) -> bool:
    """Enable or disable polling (compare-and-set: a repeated request changes
    nothing and writes no second audit row). Returns whether it changed."""
    require_manager(user)
    with transaction.atomic():
        moved = Cluster.objects.filter(id=cluster_id, enabled=not enabled).update(enabled=enabled)
        if moved:
            audit_record(action="cluster.changed", actor=user, cluster=Cluster(id=cluster_id), object_type="cluster",
                         object_id=cluster_id, detail={"before": {"enabled": not enabled},
                                                       "after": {"enabled": enabled}})
    return bool(moved)


def cluster_request_test(*, user, cluster_id: int) -> None:
    """Queue a connection test; the task runs after this transaction commits."""
    require_manager(user)
    with transaction.atomic():
        audit_record(action="cluster.test_requested", actor=user, cluster=Cluster(id=cluster_id),
                     object_type="cluster", object_id=cluster_id)
        dispatch.task_enqueue_on_commit(dispatch.TEST_CONNECTION, cluster_id)


def group_declare_policy(*, user, group_id: int, policy: str) -> bool:
    """The admin's one editable group field: the declared ``auto.offset.reset``
    (compare-and-set: a repeated request writes nothing). Returns whether it changed."""
    require_manager(user)
    with transaction.atomic():
        group = ConsumerGroup.objects.select_related("cluster").get(id=group_id)
        if not ConsumerGroup.objects.filter(id=group_id).exclude(declared_policy=policy).update(
                declared_policy=policy):
            return False
        audit_record(action="group.policy_declared", actor=user, cluster=group.cluster, object_type="group",
                     object_id=group_id, detail={"group": group.group_id, "policy": policy})
    return True


def group_update_settings(*, user, group_id: int, data: dict) -> bool:
    """Change a group's declared policy and repair defaults; audited with the
    changed fields before and after. Returns False when nothing changed."""
    require_manager(user)
    with transaction.atomic():
        group = ConsumerGroup.objects.select_for_update().select_related("cluster").get(id=group_id)
        before, after = _changes({name: getattr(group, name) for name in GROUP_SETTINGS_FIELDS},
                                 {name: data[name] for name in GROUP_SETTINGS_FIELDS})
        if not after:
            return False
        ConsumerGroup.objects.filter(id=group_id).update(**after)
        audit_record(action="group.changed", actor=user, cluster=group.cluster, object_type="group",
                     object_id=group_id, detail={"group": group.group_id, "before": before, "after": after})
    return True
