"""Personal API tokens (issue 23, item 5): made and revoked by each user on
their own page (or by an administrator), shown once, stored as SHA-256, with
an expiry and an optional read-only flag; checked by ``ApiTokenMiddleware``
on /api/ and /metrics.

One scheme for both: ``Authorization: Bearer <token>``. ``Token <token>``,
what the API took before, keeps working on /api/.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.http import JsonResponse
from django.utils import timezone

from groups.models import ApiToken
from groups.services.audit import audit_record

SCHEMES = ("bearer", "token")  # the first is the documented one
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class TokenRefused(ValueError):
    """A token request that cannot be granted; the message says why."""


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def api_token_create(*, user, name: str, days: int | None = None, read_only: bool = False,
                     created_by=None, now: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token for ``user`` valid for ``days`` (default API_TOKEN_DEFAULT_DAYS,
    at most API_TOKEN_MAX_DAYS); only its hash is stored, the key is returned
    once. ``created_by`` (the person who made it: the user, or an
    administrator) gets the audit row."""
    days = settings.API_TOKEN_DEFAULT_DAYS if days is None else days
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= settings.API_TOKEN_MAX_DAYS:
        raise TokenRefused(f"a token is valid for 1 to {settings.API_TOKEN_MAX_DAYS} days, got {days!r}")
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise TokenRefused("a token needs a name of 1 to 100 characters")
    key = "gw_" + secrets.token_urlsafe(32)
    now = now or timezone.now()
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name, key_hash=_hash(key), prefix=key[:8],
                                        expires_at=now + timedelta(days=days), read_only=read_only)
        if created_by is not None:
            audit_record(action="api_token.created", actor=created_by, object_type="api_token", object_id=token.pk,
                         detail={"user": token.user.get_username(), "name": token.name, "days": days,
                                 "read_only": read_only})
    return token, key


def api_token_revoke(*, token_id: int, by, owner=None) -> ApiToken:
    """Revokes a token of ``owner`` (default: any user's, for an administrator).
    A token of someone else, or unknown, is ``ApiToken.DoesNotExist``;
    revoking twice keeps the first time."""
    with transaction.atomic():
        tokens = ApiToken.objects.select_for_update()
        token = (tokens if owner is None else tokens.filter(user=owner)).get(id=token_id)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit_record(action="api_token.revoked", actor=by, object_type="api_token", object_id=token.pk,
                         detail={"user": token.user.get_username(), "name": token.name})
    return token


@dataclass(frozen=True)
class TokenCheck:
    """What a presented key is worth: its token and user, or why it is refused."""

    token: ApiToken | None
    refusal: str | None


def api_token_check(*, key: str, now: datetime | None = None) -> TokenCheck:
    now = now or timezone.now()
    token = ApiToken.objects.select_related("user").filter(key_hash=_hash(key)).first()
    if token is None or not token.user.is_active:
        return TokenCheck(None, "invalid API token")
    if token.revoked_at is not None:
        return TokenCheck(None, "API token revoked")
    if token.expires_at <= now:
        return TokenCheck(None, "API token expired")
    ApiToken.objects.filter(id=token.id).update(last_used_at=now)
    return TokenCheck(token, None)


def presented_key(header: str) -> str | None:
    """The key of an ``Authorization: Bearer|Token <key>`` header, or None."""
    scheme, _, key = header.strip().partition(" ")
    key = key.strip()
    return key if scheme.lower() in SCHEMES and key else None


def _is_metrics_token(request, key: str) -> bool:
    """The shared METRICS_TOKEN on /metrics is checked by the metrics view itself."""
    expected = settings.METRICS_TOKEN
    return request.path == "/metrics" and bool(expected) and hmac.compare_digest(key.encode(), expected.encode())


class ApiTokenMiddleware:
    """A token on /api/ or /metrics authenticates as the token's user.

    Token requests carry no cookies a browser could forge, so CSRF checks are
    skipped for them only; session requests keep them. An unknown, expired or
    revoked token is a 401, a read-only token's write a 403 (JSON)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/") or request.path == "/metrics":
            key = presented_key(request.headers.get("Authorization", ""))
            if key is not None and not _is_metrics_token(request, key):
                checked = api_token_check(key=key)
                if checked.token is None:
                    return JsonResponse({"error": checked.refusal}, status=401)
                if checked.token.read_only and request.method not in _SAFE_METHODS:
                    return JsonResponse({"error": "this API token is read-only: it may not change anything"},
                                        status=403)
                request.user = checked.token.user
                request._dont_enforce_csrf_checks = True
        return self.get_response(request)
