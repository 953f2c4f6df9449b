"""API tokens: created once (shown once), stored as SHA-256, checked by middleware."""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from groups.models import ApiToken
from groups.services.audit import audit_record


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def api_token_create(*, user, name: str, created_by=None) -> tuple[ApiToken, str]:
    """A new token for ``user``; only its hash is stored, the key is returned once.
    ``created_by`` (the person who made it) gets the audit row."""
    key = "gw_" + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name, key_hash=_hash(key), prefix=key[:8])
        if created_by is not None:
            audit_record(action="api_token.created", actor=created_by, object_type="api_token", object_id=token.pk,
                         detail={"user": token.user.get_username(), "name": token.name})
    return token, key


def api_token_user(*, key: str):
    token = ApiToken.objects.select_related("user").filter(key_hash=_hash(key)).first()
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(id=token.id).update(last_used_at=timezone.now())
    return token.user


class ApiTokenMiddleware:
    """``Authorization: Token <key>`` on /api/ authenticates as the token's user.

    Token requests carry no cookies a browser could forge, so CSRF checks are
    skipped for them only; session requests keep them. A wrong token is 401."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        header = request.headers.get("Authorization", "")
        if request.path.startswith("/api/") and header.startswith("Token "):
            user = api_token_user(key=header[len("Token "):].strip())
            if user is None:
                from django.http import JsonResponse

                return JsonResponse({"error": "invalid API token"}, status=401)
            request.user = user
            request._dont_enforce_csrf_checks = True
        return self.get_response(request)
