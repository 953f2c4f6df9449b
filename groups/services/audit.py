"""The audit trail: one append-only row per state change, by a person or the system."""

from __future__ import annotations

from groups.models import AuditEvent, Cluster


def audit_record(
    *, action: str, actor=None, cluster: Cluster | None = None, object_type: str = "", object_id: object = "",
    detail: dict | None = None,
) -> AuditEvent:
    """``actor`` None means the system did it. ``detail`` holds before/after
    values and must never contain a secret."""
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        system=actor is None,
        action=action,
        cluster=cluster,
        object_type=object_type,
        object_id=str(object_id),
        detail=detail or {},
    )
