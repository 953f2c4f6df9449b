"""The read-only JSON API under /api/v1/ (session login; described by
``groups.api.schema`` at /api/v1/schema).

Every list is paginated the same way: ``page`` (1-based) and ``page_size``
(default 50, at most 500); the answer is ``{"count", "page", "page_size",
"next", "previous", "results"}``. Errors are JSON ``{"error", "parameter"}``:
400 for a bad parameter, 401 without a session, 405 for a method other than
GET. An empty query parameter counts as absent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import wraps

from django.db.models import Model, QuerySet
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from groups import selectors
from groups.api.schema import openapi_document
from groups.models import Cluster, ConsumerGroup, Finding, Topic

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no"}


class BadParameter(Exception):
    def __init__(self, parameter: str, message: str):
        super().__init__(message)
        self.parameter = parameter
        self.message = message


def _error(status: int, message: str, parameter: str | None = None) -> JsonResponse:
    body = {"error": message}
    if parameter is not None:
        body["parameter"] = parameter
    return JsonResponse(body, status=status)


def api_view(view: Callable[[HttpRequest], JsonResponse]) -> Callable[[HttpRequest], JsonResponse]:
    """GET only, session login, and a BadParameter turned into a 400 naming it.
    Never redirects: an API client gets JSON, not the login page."""

    @never_cache
    @wraps(view)
    def wrapper(request: HttpRequest) -> JsonResponse:
        if request.method not in ("GET", "HEAD"):
            response = _error(405, f"method {request.method} not allowed")
            response["Allow"] = "GET, HEAD"
            return response
        if not request.user.is_authenticated:
            return _error(401, "authentication required: log in first")
        try:
            return view(request)
        except BadParameter as error:
            return _error(400, error.message, error.parameter)

    return wrapper


# --- Parameters ---------------------------------------------------------------


def _text(request: HttpRequest, name: str) -> str | None:
    value = request.GET.get(name, "")
    if value == "":
        return None
    # PostgreSQL text cannot hold NUL, so no stored name can contain one.
    if "\x00" in value:
        raise BadParameter(name, f"{name} must not contain NUL characters")
    return value


def _positive_int(request: HttpRequest, name: str, default: int, maximum: int | None = None) -> int:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise BadParameter(name, f"{name} must be a positive integer, got {raw!r}")
    value = int(raw)
    if maximum is not None and value > maximum:
        raise BadParameter(name, f"{name} must be at most {maximum}, got {value}")
    return value


def _boolean(request: HttpRequest, name: str, default: bool) -> bool:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadParameter(name, f"{name} must be true or false, got {raw!r}")


def _choice(request: HttpRequest, name: str, choices: list[str]) -> str | None:
    value = _text(request, name)
    if value is not None and value not in choices:
        raise BadParameter(name, f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


# --- Pagination -----------------------------------------------------------------


def _page_url(request: HttpRequest, page: int) -> str:
    # QueryDict.urlencode re-encodes every value, so hostile group ids survive.
    params = request.GET.copy()
    params["page"] = str(page)
    return request.build_absolute_uri(f"{request.path}?{params.urlencode()}")


def _paginated(request: HttpRequest, queryset: QuerySet, serialize: Callable[[Model], dict]) -> JsonResponse:
    """One count and one query for the page (plus the queryset's prefetches).

    A page past the end is an empty page, not an error: a client walking
    ``next`` while findings close can land there; ``previous`` then points
    at the last page.
    """
    page = _positive_int(request, "page", 1)
    page_size = _positive_int(request, "page_size", DEFAULT_PAGE_SIZE, maximum=MAX_PAGE_SIZE)
    count = queryset.count()
    last_page = max(1, -(-count // page_size))
    start = (page - 1) * page_size
    results = [serialize(row) for row in queryset[start : start + page_size]] if start < count else []
    return JsonResponse(
        {
            "count": count,
            "page": page,
            "page_size": page_size,
            "next": _page_url(request, page + 1) if page < last_page else None,
            "previous": _page_url(request, min(page - 1, last_page)) if page > 1 else None,
            "results": results,
        }
    )


# --- Representations --------------------------------------------------------------


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def finding_json(finding: Finding) -> dict:
    return {
        "id": finding.id,
        "cluster": finding.cluster.name,
        "topic": finding.topic.name,
        "partition": finding.partition,
        "group": finding.group.group_id,
        "generation": finding.generation.number,
        "state": finding.state,
        "found_at": _iso(finding.created_at),
        "updated_at": _iso(finding.updated_at),
        "closed_at": _iso(finding.closed_at),
        "closed_reason": finding.closed_reason,
        "log_start_offset": finding.log_start_offset,
        "high_watermark": finding.high_watermark,
        "committed_offset": finding.committed_offset,
        "lag": finding.lag,
        "missed_definite": finding.missed_definite,
        "missed_possible": finding.missed_possible,
        "expired": finding.expired,
        "backfill_start": finding.backfill_start,
        "backfill_end": finding.backfill_end,
        "policy_source": finding.policy_source or None,
        "explanation": finding.explanation,
        "owner_client_id": finding.owner_client_id,
        "owner_host": finding.owner_host,
    }


def cluster_json(cluster: Cluster) -> dict:
    # Built field by field: the password and its ciphertext are never read here.
    return {
        "name": cluster.name,
        "bootstrap_servers": cluster.bootstrap_servers,
        "security_protocol": cluster.security_protocol,
        "sasl_mechanism": cluster.sasl_mechanism,
        "sasl_username": cluster.sasl_username,
        "sasl_password_set": cluster.sasl_password_set,
        "enabled": cluster.enabled,
        "status": cluster.status,
        "last_poll_at": _iso(cluster.last_poll_at),
        "last_poll_duration_ms": cluster.last_poll_duration_ms,
        "last_error": cluster.last_error,
        "polls_total": cluster.polls_total,
        "poll_failures_total": cluster.poll_failures_total,
    }


def topic_json(topic: Topic) -> dict:
    return {
        "cluster": topic.cluster.name,
        "name": topic.name,
        "topic_id": topic.kafka_topic_id,
        "partition_count": topic.partition_count,
        "deleted": topic.deleted,
        "internal": topic.is_internal,
        "generation": topic.latest_generation,
        "first_seen_at": _iso(topic.first_seen_at),
    }


def group_json(group: ConsumerGroup) -> dict:
    return {
        "cluster": group.cluster.name,
        "group_id": group.group_id,
        "state": group.state,
        "type": group.type,
        "assignor": group.assignor,
        "member_count": group.member_count,
        "declared_policy": group.declared_policy,
        "present": group.present,
        "topics": [{"topic": link.topic.name, "lag": link.lag} for link in group.group_topics.all()],
        "open_findings": group.open_findings,
    }


# --- Views ----------------------------------------------------------------------


@api_view
def findings(request: HttpRequest) -> JsonResponse:
    queryset = selectors.findings_list(
        cluster=_text(request, "cluster"),
        topic=_text(request, "topic"),
        group=_text(request, "group"),
        state=_choice(request, "state", Finding.State.values),
        include_closed=_boolean(request, "include_closed", False),
    )
    return _paginated(request, queryset, finding_json)


@api_view
def clusters(request: HttpRequest) -> JsonResponse:
    return _paginated(request, selectors.clusters_list(), cluster_json)


@api_view
def topics(request: HttpRequest) -> JsonResponse:
    return _paginated(request, selectors.topics_list(cluster=_text(request, "cluster")), topic_json)


@api_view
def groups(request: HttpRequest) -> JsonResponse:
    return _paginated(request, selectors.groups_list(cluster=_text(request, "cluster")), group_json)


@api_view
def schema(request: HttpRequest) -> JsonResponse:
    return JsonResponse(openapi_document())
