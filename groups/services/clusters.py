"""Writes for clusters and consumer-group settings, for the pages, the admin
and ``register_cluster`` alike: each checks the permission, checks a
cluster's connection settings (``cluster_settings_problems``, which the
cluster form shows as its errors), and writes one audit row with before and
after values (a secret only as "set" or "changed", a PEM as its fingerprint)."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from groups.domain.cluster_config import ClusterConfig
from groups.domain.tls import connection_problems
from groups.models import Cluster, ConsumerGroup
from groups.services import dispatch
from groups.services.access import scope_require_cluster_manager, scope_require_group
from groups.services.audit import audit_record


MANAGE_PERMISSION = "groups.manage_clusters"
# The fields a person edits; what the audit compares before and after.
CLUSTER_FIELDS = ("name", "bootstrap_servers", "security_protocol", "sasl_mechanism", "sasl_username", "webhook_url")
# How to connect beyond SASL (TLS trust and client certificate, OAuth); audited when not the default.
CONNECTION_FIELDS = ("ssl_ca_pem", "ssl_certificate_pem", "ssl_endpoint_identification", "oauth_token_endpoint",
                     "oauth_client_id", "oauth_scope")
EDITABLE_FIELDS = (*CLUSTER_FIELDS, *CONNECTION_FIELDS)
SECRETS = Cluster.SECRETS
GROUP_SETTINGS_FIELDS = ("declared_policy", "declared_isolation", "auto_repair", "backfill_sink", "replay_topic")
TEST_MESSAGE_MAX_CHARS = 1000


def require_manager(user, *, group: ConsumerGroup | None = None) -> None:
    """Clusters: the approver role limited to no team scope. A group's
    settings: an approver role whose scope covers the group."""
    if not (user and user.is_authenticated and user.has_perm(MANAGE_PERMISSION)):
        raise PermissionDenied("changing clusters and group settings needs the approver role")
    if group is None:
        scope_require_cluster_manager(user)
    else:
        scope_require_group(user, cluster=group.cluster.name, group=group.group_id)


def _changes(before: dict, after: dict) -> tuple[dict, dict]:
    """Only the fields whose value changed, as (before, after)."""
    changed = [name for name in after if before.get(name) != after[name]]
    return {name: before.get(name) for name in changed}, {name: after[name] for name in changed}


def _audited(values: dict) -> dict:
    """Values as the audit keeps them: a PEM as the SHA-256 of its text (long, and read by nobody)."""
    return {name: (f"sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}" if name.endswith("_pem") and value
                   else value) for name, value in values.items()}


def cluster_settings_problems(*, data: Mapping, secrets: Mapping[str, str], clear: Collection[str] = (),
                              cluster: Cluster | None = None) -> dict[str, str]:
    """``{field: problem}`` for the settings as they would be stored: each
    field from ``data``, else the cluster's; each secret new when given,
    gone when cleared, else the stored one (``groups.domain.tls``)."""
    def value(name: str):
        return data[name] if name in data else getattr(cluster or Cluster(), name)

    def secret(name: str) -> str:
        if secrets.get(name):
            return secrets[name]
        return "" if name in clear or cluster is None else cluster.secret(name)

    settings = ClusterConfig(
        value("bootstrap_servers") or "",
        **{name: value(name) for name in ("security_protocol", "sasl_mechanism", "sasl_username", "ssl_ca_pem",
                                          "ssl_certificate_pem", "oauth_token_endpoint", "oauth_client_id")},
        **{name: secret(name) for name in SECRETS},
    )
    return connection_problems(settings, now=timezone.now())


def _check(**kwargs) -> None:
    problems = cluster_settings_problems(**kwargs)
    if problems:
        raise ValidationError({name: [problem] for name, problem in problems.items()})


def _secret_detail(cluster: Cluster, changed: Collection[str]) -> dict:
    """What the audit says about changed secrets: the SASL password as before
    (``password_changed``, ``password_set``), the others by name."""
    detail: dict = {}
    if "sasl_password" in changed:
        detail.update(password_changed=True, password_set=cluster.has_sasl_password)
    others = {name: cluster.has_secret(name) for name in SECRETS if name in changed and name != "sasl_password"}
    if others:
        detail["secrets_changed"] = others
    return detail


def cluster_create(*, user, data: dict, secrets: Mapping[str, str]) -> Cluster:
    """Register a cluster; the audit row holds its settings and which secrets were given.
    ValidationError when its connection settings cannot work (nothing written)."""
    require_manager(user)
    _check(data=data, secrets=secrets)
    with transaction.atomic():
        cluster = Cluster(**{name: data[name] for name in EDITABLE_FIELDS if name in data})
        for name in SECRETS:
            cluster.set_secret(name, secrets.get(name, ""))
        cluster.save()
        audit_record(action="cluster.added", actor=user, cluster=cluster, object_type="cluster",
                     object_id=cluster.id, detail=_added_detail(cluster))
    return cluster


def _added_detail(cluster: Cluster) -> dict:
    defaults = Cluster()
    after = {name: getattr(cluster, name) for name in CLUSTER_FIELDS}
    after.update({name: getattr(cluster, name) for name in CONNECTION_FIELDS
                  if getattr(cluster, name) != getattr(defaults, name)})
    detail = {"before": {}, "after": _audited(after)}
    if cluster.has_sasl_password or cluster.sasl_mechanism:
        detail["password_set"] = cluster.has_sasl_password
    others = sorted(name for name in SECRETS if name != "sasl_password" and cluster.has_secret(name))
    if others:
        detail["secrets_set"] = others
    return detail


def cluster_update(*, user, cluster_id: int, data: dict, secrets: Mapping[str, str],
                   clear: Collection[str] = ()) -> bool:
    """Change a cluster's settings. An empty secret keeps the stored one;
    a name in ``clear`` removes it. The audit row says only which secrets
    changed, never to what. Returns False when nothing changed (and writes
    nothing); ValidationError when the result could not connect."""
    require_manager(user)
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        _check(data=data, secrets=secrets, clear=clear, cluster=cluster)
        editable = [name for name in EDITABLE_FIELDS if name != "name"]
        before, after = _changes({name: getattr(cluster, name) for name in editable},
                                 {name: data[name] for name in editable if name in data})
        changed_secrets = [name for name in SECRETS
                           if (secrets.get(name) and secrets[name] != cluster.secret(name))
                           or (name in clear and cluster.has_secret(name))]
        if not after and not changed_secrets:
            return False
        for name, value in after.items():
            setattr(cluster, name, value)
        for name in changed_secrets:
            cluster.set_secret(name, "" if name in clear else secrets[name])
        cluster.save(update_fields=[*after, *(f"{name}_encrypted" for name in changed_secrets)])
        detail = {"before": _audited(before), "after": _audited(after), **_secret_detail(cluster, changed_secrets)}
        audit_record(action="cluster.changed", actor=user, cluster=cluster, object_type="cluster",
                     object_id=cluster.id, detail=detail)
    return True


def cluster_register(*, data: dict, secrets: Mapping[str, str] | None = None, source: str) -> tuple[Cluster, bool]:
    """The system's idempotent registration (``manage.py register_cluster``):
    create the cluster, or update it, from data the cluster form validated;
    secrets given replace the stored ones. Audited as the system's, naming
    ``source``. Returns the cluster and whether it was created; nothing is
    written when nothing changed."""
    secrets = {name: value for name, value in (secrets or {}).items() if value}
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(name=data["name"]).first()
        _check(data=data, secrets=secrets, cluster=cluster)
        if cluster is None:
            cluster = Cluster(**{name: data[name] for name in EDITABLE_FIELDS if name in data})
            for name, value in secrets.items():
                cluster.set_secret(name, value)
            cluster.save()
            audit_record(action="cluster.added", actor=None, cluster=cluster, object_type="cluster",
                         object_id=cluster.id, detail={**_added_detail(cluster), "via": source})
            return cluster, True
        editable = [name for name in EDITABLE_FIELDS if name != "name" and name in data]
        before, after = _changes({name: getattr(cluster, name) for name in editable},
                                 {name: data[name] for name in editable})
        changed_secrets = [name for name, value in secrets.items() if value != cluster.secret(name)]
        if after or changed_secrets:
            for name, value in after.items():
                setattr(cluster, name, value)
            for name in changed_secrets:
                cluster.set_secret(name, secrets[name])
            cluster.save(update_fields=[*after, *(f"{name}_encrypted" for name in changed_secrets)])
            audit_record(action="cluster.changed", actor=None, cluster=cluster, object_type="cluster",
                         object_id=cluster.id, detail={"before": _audited(before), "after": _audited(after),
                                                       **_secret_detail(cluster, changed_secrets), "via": source})
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


def cluster_record_features(*, cluster_id: int, metadata_version: str, levels: Mapping[str, int]) -> bool:
    """Store what the cluster finalized (a system observation, not audited);
    True when it changed (an upgrade, or the first read)."""
    features = {"metadata_version": metadata_version, "levels": dict(sorted(levels.items()))}
    return bool(Cluster.objects.filter(id=cluster_id).exclude(kafka_features=features)
                .update(kafka_features=features))


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


def group_declare_policy(*, user, group_id: int, policy: str | None = None, isolation: str | None = None) -> bool:
    """The admin's editable group fields: the declared ``auto.offset.reset``
    and ``isolation.level`` (None: left as it is; compare-and-set: a repeated
    request writes nothing). Returns whether it changed."""
    require_manager(user, group=ConsumerGroup.objects.select_related("cluster").get(id=group_id))
    declared = {name: value for name, value in (("declared_policy", policy), ("declared_isolation", isolation))
                if value is not None}
    if not declared:
        return False
    with transaction.atomic():
        group = ConsumerGroup.objects.select_related("cluster").get(id=group_id)
        if not ConsumerGroup.objects.filter(id=group_id).exclude(**declared).update(**declared):
            return False
        said = {"policy": policy, "isolation": isolation}
        audit_record(action="group.policy_declared", actor=user, cluster=group.cluster, object_type="group",
                     object_id=group_id, detail={"group": group.group_id,
                                                 **{k: v for k, v in said.items() if v is not None}})
    return True


def group_update_settings(*, user, group_id: int, data: dict) -> bool:
    """Change a group's declared policy and repair defaults; audited with the
    changed fields before and after. Returns False when nothing changed."""
    require_manager(user, group=ConsumerGroup.objects.select_related("cluster").get(id=group_id))
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
