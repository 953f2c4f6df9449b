"""The database filter of a group kind (``groups.domain.group_kinds``),
shared by the faces that narrow findings or groups by it. It must select
exactly the groups ``group_kind`` names so: tests/integration/test_group_kinds.py
checks one against the other on every kind."""

from __future__ import annotations

from django.db.models import Q

from groups.domain.group_kinds import CONNECT, CONNECT_PREFIX, CONNECT_TYPES, GROUP_KINDS, OWN_KIND_TYPES, UNKNOWN


def group_kind_q(kind: str, *, path: str = "") -> Q:
    """The groups of ``kind``; ``path`` leads to the group from the rows
    filtered (``"group__"`` for findings). A ValueError for a kind that is
    not one of ``GROUP_KINDS``: callers validate what people send."""
    if kind not in GROUP_KINDS:
        raise ValueError(f"unknown group type {kind!r}")
    type_, group_id = f"{path}type", f"{path}group_id"
    connect_id = Q(**{f"{group_id}__startswith": CONNECT_PREFIX})
    if kind == CONNECT:
        return Q(**{f"{type_}__in": CONNECT_TYPES}) & connect_id
    if kind in CONNECT_TYPES:
        return Q(**{type_: kind}) & ~connect_id
    if kind == UNKNOWN:
        return ~Q(**{f"{type_}__in": (*CONNECT_TYPES, *OWN_KIND_TYPES)})
    return Q(**{type_: kind})
