"""GET /healthz: the state of the database, Redis and every enabled cluster.

Answered from stored state: a cluster's health is what its last poll found
(no Kafka call here, so an anonymous request can never make Gapwatch dial a
cluster). 200 when all are well, 503 otherwise. Anonymous callers (load
balancers) get only the overall status; cluster names, addresses and Kafka
errors are shown to logged-in users with a role.
"""

from __future__ import annotations

from django.db import connection
from django.http import JsonResponse
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


@never_cache
@require_GET
def healthz(request):
    database = _check_database()
    clusters = _stored_clusters() if database["ok"] else {}
    checks = {"database": database, "redis": _check_redis(), "kafka": clusters}
    healthy = database["ok"] and checks["redis"]["ok"] and all(c["ok"] for c in clusters.values())
    body: dict = {"status": "ok" if healthy else "unavailable"}
    if database["ok"] and request.user.is_authenticated and has_role(request.user):
        body["checks"] = checks
    return JsonResponse(body, status=200 if healthy else 503)
