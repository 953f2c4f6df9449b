"""GET /healthz: the state of the database, Redis and every enabled cluster.

200 when all answer, 503 naming what does not. Clusters are checked in
parallel with a short timeout so one dead cluster cannot stall the probe.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from groups.models import Cluster
from tasks.kafka import ClusterConfig, KafkaAdapter, KafkaUnavailable

CLUSTER_TIMEOUT_SECONDS = 3.0


def _check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("select 1")
        return {"ok": True}
    except Exception as error:  # noqa: BLE001 - reported, not raised
        return {"ok": False, "error": f"database: {error}"}


def _check_redis() -> dict:
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        client.ping()
        return {"ok": True}
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": f"redis: {error}"}


def _check_cluster(config: ClusterConfig) -> dict:
    try:
        brokers = KafkaAdapter(config, timeout=CLUSTER_TIMEOUT_SECONDS).ping()
        return {"ok": True, "brokers": brokers}
    except KafkaUnavailable as error:
        return {"ok": False, "error": f"kafka unreachable: {error}"}


@never_cache
@require_GET
def healthz(request):
    database = _check_database()
    clusters: dict[str, dict] = {}
    if database["ok"]:
        configs = {cluster.name: cluster.client_config() for cluster in Cluster.objects.filter(enabled=True)}
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(configs)))) as pool:
            results = dict(zip(configs, pool.map(_check_cluster, configs.values())))
        clusters = results
    checks = {"database": database, "redis": _check_redis(), "kafka": clusters}
    healthy = database["ok"] and checks["redis"]["ok"] and all(c["ok"] for c in clusters.values())
    body = {"status": "ok" if healthy else "unavailable", "checks": checks}
    return JsonResponse(body, status=200 if healthy else 503)
