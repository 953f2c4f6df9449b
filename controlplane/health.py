"""GET /healthz: the state of the database, Redis and every enabled cluster;
GET /health/ shows the same checks as a page of the app, for people.

Answered from stored state: a cluster's health is what its last poll found
(no Kafka call here, so an anonymous request can never make Gapwatch dial a
cluster). 200 when all are well, 503 otherwise. Anonymous callers (load
balancers) get only the overall status; cluster names, addresses and Kafka
errors are shown to logged-in users with a role.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from groups.models import Cluster
from groups.services.redis_client import redis_client
from groups.roles import has_role
from groups.selectors.clusters import clusters_for_health

BAD_CLUSTER_STATES = (Cluster.Status.UNREACHABLE, Cluster.Status.ERROR)


def _check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("select 1")
        return {"ok": True}
    except Exception as error:  # noqa: BLE001 - reported, not raised
        return {"ok": False, "error": f"database: {error}"}


def _check_redis() -> dict:
    try:
        client = redis_client(timeout=2)
        client.ping()
        return {"ok": True}
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": f"redis: {error}"}


def _stored_clusters() -> dict[str, dict]:
    return {
        cluster.name: {
            "ok": cluster.status not in BAD_CLUSTER_STATES, "status": cluster.status,
            "last_poll_at": cluster.last_poll_at.isoformat() if cluster.last_poll_at else None,
            **({"error": f"kafka unreachable: {cluster.last_error}"} if cluster.status in BAD_CLUSTER_STATES else {}),
        }
        for cluster in clusters_for_health()
    }


def health_checks(user) -> tuple[bool, dict | None]:
    """Whether all is well, and the checks (database, Redis, each cluster) when
    ``user`` may see them (logged in with a role, the database answering), else
    None. The JSON endpoint and the Health page both ask here."""
    database = _check_database()
    clusters = _stored_clusters() if database["ok"] else {}
    checks = {"database": database, "redis": _check_redis(), "kafka": clusters}
    healthy = database["ok"] and checks["redis"]["ok"] and all(c["ok"] for c in clusters.values())
    shown = database["ok"] and user.is_authenticated and has_role(user)
    return healthy, checks if shown else None


@never_cache
@require_GET
def healthz(request):
    healthy, checks = health_checks(request.user)
    body: dict = {"status": "ok" if healthy else "unavailable"}
    if checks is not None:
        body["checks"] = checks
    return JsonResponse(body, status=200 if healthy else 503)


@never_cache
@login_required
@require_GET
def health_page(request):
    """The checks inside the app's layout, in words; 503 as /healthz when something is wrong."""
    healthy, checks = health_checks(request.user)
    clusters = []
    for name, check in sorted(((checks or {}).get("kafka") or {}).items()):
        polled = check.get("last_poll_at")
        clusters.append({"name": name, **check, "last_poll_at": datetime.fromisoformat(polled) if polled else None})
    return render(request, "health.html", {"healthy": healthy, "checks": checks, "clusters": clusters},
                  status=200 if healthy else 503)
