"""The JSON API under /api/v1/, on django-ninja: one NinjaAPI, its
authentication, and the error bodies every endpoint shares.

Authentication: a session (CSRF checked on unsafe requests) or
``Authorization: Bearer <token>`` (or ``Token <token>``; checked by groups.services.tokens.ApiTokenMiddleware,
which sets ``request.user``). Errors are JSON ``{"error"}``, plus
``"parameter"`` naming the input at fault on a 400: 401 without credentials,
403 without the approver role, 404 unknown, 409 duplicate (with ``"job"``) or
lost to another action on the same finding,
503 task queue away. The OpenAPI document is served at /api/v1/schema, and
read as interactive documentation at /api/v1/docs (groups/api/urls.py).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import APIKeyHeader, SessionAuth

from groups.api import expansion, read, rules, write
from groups.api.schemas import Error
from groups.services.dispatch import QueueUnavailable
from groups.services.expansion.job import ExpansionJobNotFound
from groups.services.expansion.plan import ExpansionNotFound
from groups.services.remediation import Conflict, DuplicateJob, FindingNotFound
from groups.services.tokens import presented_key


class TokenAuth(APIKeyHeader):
    """`Bearer <token>` (or the older `Token <token>`): a personal token made on
    the user's "API tokens" page, in the admin or with manage.py create_api_token."""

    param_name = "Authorization"

    def authenticate(self, request: HttpRequest, key: str | None):
        # The middleware already turned a good key into request.user (a wrong one into a 401).
        if key and presented_key(key) and request.user.is_authenticated:
            return request.user
        return None


class ObjectBody(Parser):
    """A body is one JSON object. (ninja calls this only for a non-empty body;
    an empty one is a 400 "body is required".) A query parameter that takes
    one value is refused when given several (ninja would keep the last one
    and drop the others unseen)."""

    def parse_querydict(self, data, list_fields: list[str], request: HttpRequest) -> dict:
        for key in data:
            if key not in list_fields and len(data.getlist(key)) > 1:
                raise ValidationError([{"type": "repeated", "loc": ("query", key)}])
        return super().parse_querydict(data, list_fields, request)

    def parse_body(self, request: HttpRequest):
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            raise BadBody from None
        if not isinstance(body, dict):
            raise BadBody
        return body


class BadBody(Exception):
    pass


class GapwatchAPI(NinjaAPI):
    def get_content_type(self) -> str:
        # JSON is UTF-8 by definition (RFC 8259); the API has always answered plain application/json.
        return "application/json"


api = GapwatchAPI(
    title="Gapwatch API",
    version="1",
    description="Clusters, topics, consumer groups and the partitions groups missed; approve or dismiss "
    "remediations. An empty query parameter counts as absent.",
    auth=[TokenAuth(), SessionAuth(csrf=True)],
    parser=ObjectBody(),
    # Served by the `schema` operation below: behind the same login, and described in itself.
    openapi_url=None,
    docs_url=None,
    urls_namespace="api",
)


def _error(request: HttpRequest, status: int, message: str, **extra) -> HttpResponse:
    return api.create_response(request, {"error": message, **extra}, status=status)


# What pydantic's error types mean for an API client, by parameter name.
_PLAIN = {
    "string_type": "must be text",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "bool_parsing": "must be true or false",
    "missing": "is required",
    "dict_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "list_type": "must be a list",
    "repeated": "must be given once",  # ObjectBody.parse_querydict
}
# Where ninja puts the input in a location, before the field name.
_SOURCES = {"query", "body", "path", "header", "cookie", "form"}
_CONTAINERS = {"filters", "payload", "ninja_pagination", "pagination"}


def _parameter(loc: tuple) -> str:
    """The client's name for the input at fault: ("body", "payload", "value", "int") -> "value"."""
    names = [str(part) for part in loc if part not in _SOURCES and part not in _CONTAINERS]
    return names[0] if names else "body"


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, error: ValidationError) -> HttpResponse:
    first = error.errors[0]
    parameter = _parameter(tuple(first.get("loc", ())))
    detail = _PLAIN.get(first.get("type")) or first.get("msg", "is not valid").replace("Input should be", "must be")
    message = f"{parameter} {detail}"
    if first.get("type") != "missing" and not isinstance(first.get("input"), (dict, list, type(None))):
        message += f", got {first['input']!r}"
    return _error(request, 400, message, parameter=parameter)


@api.exception_handler(AuthenticationError)
def _anonymous(request: HttpRequest, error: AuthenticationError) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        return _error(request, 401, "authentication required: log in first")
    return _error(request, 401, "authentication required: log in or send Authorization: Bearer <token>")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, error: HttpError) -> HttpResponse:
    # ninja turns any exception of the parser into a 400 "Cannot parse request body".
    if isinstance(error.__cause__, BadBody):
        return _error(request, 400, "the body must be a JSON object", parameter="body")
    return _error(request, error.status_code, str(error))


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, error: Http404) -> HttpResponse:
    return _error(request, 404, str(error) or "not found")


@api.exception_handler(FindingNotFound)
def _no_finding(request: HttpRequest, error: FindingNotFound) -> HttpResponse:
    return _error(request, 404, " ".join(error.messages))


@api.exception_handler(ExpansionNotFound)
def _no_topic(request: HttpRequest, error: ExpansionNotFound) -> HttpResponse:
    return _error(request, 404, str(error))


@api.exception_handler(ExpansionJobNotFound)
def _no_expansion(request: HttpRequest, error: ExpansionJobNotFound) -> HttpResponse:
    return _error(request, 404, str(error))


@api.exception_handler(rules.RuleNotFound)
def _no_rule(request: HttpRequest, error: rules.RuleNotFound) -> HttpResponse:
    return _error(request, 404, str(error))


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, error: PermissionDenied) -> HttpResponse:
    return _error(request, 403, str(error) or "permission denied")


@api.exception_handler(DuplicateJob)
def _duplicate(request: HttpRequest, duplicate: DuplicateJob) -> HttpResponse:
    return _error(request, 409, str(duplicate), job=duplicate.job.id)


@api.exception_handler(Conflict)
def _conflict(request: HttpRequest, conflict: Conflict) -> HttpResponse:
    """Another action on the finding or job came first (issue 12): a dismissal
    against an approval, a cancel against an approval, a closed finding."""
    return _error(request, 409, str(conflict))


@api.exception_handler(QueueUnavailable)
def _queue_away(request: HttpRequest, error: QueueUnavailable) -> HttpResponse:
    return _error(request, 503, str(error))


@api.exception_handler(DjangoValidationError)
def _refused(request: HttpRequest, error: DjangoValidationError) -> HttpResponse:
    return _error(request, 400, " ".join(error.messages))


@api.get("schema", response={200: dict[str, Any], 401: Error, 403: Error}, operation_id="schema",
         summary="This document.")
def schema(request: HttpRequest):
    return api.get_openapi_schema()


# Writes first: POST findings/dismiss must not be taken for GET findings/{id} with id "dismiss".
api.add_router("", write.router)
api.add_router("", expansion.router)
api.add_router("", rules.router)
api.add_router("", read.router)
