"""Single sign-on through OpenID Connect (issue 23, item 1), on
mozilla-django-oidc: the authorization-code flow with PKCE (S256), the ID
token's signature checked against the provider's JWKS, and its issuer,
audience and expiry checked here (the library checks the signature and the
nonce only).

Why mozilla-django-oidc: it is a Django authentication backend and three
views, maintained by Mozilla, with PKCE, nonce and state built in and hooks
for exactly what Gapwatch decides itself (which account a login is, and its
roles); django-allauth would bring its own account model and pages, and
Authlib would leave the login views, the session and the user to us.

Configured from the environment (controlplane/settings.py): OIDC_ISSUER,
OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_SCOPES, OIDC_GROUPS_CLAIM,
OIDC_USERNAME_CLAIM, OIDC_PROVIDER_NAME. The provider's endpoints are read
from its discovery document (``<issuer>/.well-known/openid-configuration``)
at the first login, not at start: a provider that is down keeps no one
from starting Gapwatch, or from logging in locally.

A login is matched to an account by (issuer, subject) only, never by e-mail
or username: an account made in Gapwatch (or by another provider) with the
same name is not taken over. A new person gets a new account, named after
OIDC_USERNAME_CLAIM (with a suffix if that name is taken). Roles come from
the groups claim (``groups.services.identity``).
"""

from __future__ import annotations

import logging
import time
from urllib.parse import urlencode, urlsplit

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.views import LoginView
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
    OIDCLogoutView,
)

from groups.models import DirectoryIdentity
from groups.services.identity import Identity, directory_user_create, identity_login
from groups.web.ldap_login import ldap_enabled, login_problem
from groups.selectors.access import users_with_identity

log = logging.getLogger("gapwatch.sso")

# mozilla-django-oidc setting -> the discovery document's key.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_discovery: dict[str, tuple[float, dict]] = {}
DISCOVERY_SECONDS = 3600


def oidc_enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def discovered(issuer: str) -> dict:
    """The provider's discovery document, fetched once an hour per process."""
    cached = _discovery.get(issuer)
    if cached is not None and time.monotonic() - cached[0] < DISCOVERY_SECONDS:
        return cached[1]
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    answer = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL)
    answer.raise_for_status()
    document = answer.json()
    if document.get("issuer") != issuer:
        raise ImproperlyConfigured(f"the provider at {url} says its issuer is {document.get('issuer')!r}, "
                                   f"not OIDC_ISSUER {issuer!r}")
    _discovery[issuer] = (time.monotonic(), document)
    return document


_LATER = "(discovered at the first login)"


def endpoint(setting: str) -> str:
    """A provider endpoint: the explicit setting, or the discovery document's."""
    explicit = getattr(settings, setting, None)
    return explicit or discovered(settings.OIDC_ISSUER)[_DISCOVERED[setting]]


def _setting(attr: str, *default):
    """mozilla-django-oidc's settings are ours. Its views and backend read the
    endpoints when they are made (for every local login too): they get a
    placeholder, and ``_Endpoint`` reads the real one when it is used."""
    if attr in _DISCOVERED:
        return _LATER
    if default:
        return getattr(settings, attr, default[0])
    return getattr(settings, attr)


class _Endpoint:
    """A provider endpoint read when used, not when a view or backend is made."""

    def __init__(self, setting: str) -> None:
        self.setting = setting

    def __get__(self, obj, owner=None):
        return self if obj is None else endpoint(self.setting)

    def __set__(self, obj, value) -> None:
        pass  # the placeholder the library's __init__ stores


class _Configured:
    get_settings = staticmethod(_setting)

    def dispatch(self, request, *args, **kwargs):
        if not oidc_enabled():
            raise Http404("single sign-on is not configured")
        try:
            return super().dispatch(request, *args, **kwargs)
        except SuspiciousOperation as error:
            log.warning("single sign-on refused: %s", error)
            return redirect(reverse("login") + "?sso=failed")
        except (requests.RequestException, ValueError, KeyError, ImproperlyConfigured) as error:
            # The provider is down or answers nonsense: say so on the login page.
            log.warning("single sign-on failed: %s", error)
            return redirect(reverse("login") + "?sso=unreachable")


class LoginStart(_Configured, OIDCAuthenticationRequestView):
    """GET /oidc/authenticate/: to the provider's login page (state, nonce, PKCE)."""

    OIDC_OP_AUTH_ENDPOINT = _Endpoint("OIDC_OP_AUTHORIZATION_ENDPOINT")


class LoginCallback(_Configured, OIDCAuthenticationCallbackView):
    """GET /oidc/callback/: the provider's answer; a refused login lands on
    the login page with a message."""

    @property
    def failure_url(self):
        return reverse("login") + "?sso=failed"


class OidcBackend(OIDCAuthenticationBackend):
    get_settings = staticmethod(_setting)
    OIDC_OP_TOKEN_ENDPOINT = _Endpoint("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = _Endpoint("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = _Endpoint("OIDC_OP_JWKS_ENDPOINT")

    def __init__(self, *args, **kwargs):
        # Not the library's __init__: its configuration check reads the JWKS
        # endpoint, and Django makes a backend for every request of a session
        # (get_user) and every local login: none of them may ask the provider.
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None  # the provider's keys come from its JWKS
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        # Only the callback's request (a code and a state) is an OpenID login;
        # a local login never reaches the provider.
        if not oidc_enabled() or request is None or "code" not in request.GET or "password" in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        audiences = payload.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        if payload.get("iss") != settings.OIDC_ISSUER:
            raise SuspiciousOperation(f"ID token from issuer {payload.get('iss')!r}, not {settings.OIDC_ISSUER!r}")
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token not meant for this client (aud)")
        if float(payload.get("exp", 0)) < time.time():
            raise SuspiciousOperation("ID token expired")
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        # The subject and issuer are the ID token's (checked above); the rest may come from userinfo.
        claims = {**super().get_userinfo(access_token, id_token, payload)}
        if claims.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about another subject than the ID token")
        return {**payload, **claims, "iss": payload["iss"]}

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims):
        return users_with_identity(source=DirectoryIdentity.Source.OIDC, issuer=claims["iss"], subject=claims["sub"])

    def create_user(self, claims):
        return self.update_user(directory_user_create(identity=self._identity(claims)), claims)

    def update_user(self, user, claims):
        identity_login(user=user, identity=self._identity(claims))
        return user

    @staticmethod
    def _identity(claims) -> Identity:
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        groups = [groups] if isinstance(groups, str) else groups
        return Identity(
            source=DirectoryIdentity.Source.OIDC, issuer=claims["iss"], subject=claims["sub"],
            username=str(claims.get(settings.OIDC_USERNAME_CLAIM) or claims.get("email") or ""),
            groups=tuple(str(g) for g in groups if isinstance(g, str | int)),
            email=str(claims.get("email") or ""), first_name=str(claims.get("given_name") or ""),
            last_name=str(claims.get("family_name") or ""),
        )


def provider_logout_url(request) -> str:
    """Where logging out sends an OpenID user: the provider's end-session
    endpoint (ending the provider's session too), then back to the login page."""
    back = request.build_absolute_uri(reverse("login"))
    id_token = request.session.get("oidc_id_token")
    if not oidc_enabled() or not id_token:
        return back
    endpoint = discovered(settings.OIDC_ISSUER).get("end_session_endpoint")
    if not endpoint:
        return back
    return endpoint + "?" + urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": back,
                                       "client_id": settings.OIDC_RP_CLIENT_ID})


class Logout(OIDCLogoutView):
    """POST /accounts/logout/: ends the Gapwatch session, and the provider's for an OpenID login."""

    get_settings = staticmethod(_setting)


class LocalBackend(ModelBackend):
    """Gapwatch's own passwords (local accounts), unless LOCAL_LOGIN=0."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.LOCAL_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


_SSO_MESSAGES = {
    "failed": "The single sign-on login was refused. Try again, or ask your administrator.",
    "unreachable": "The single sign-on provider cannot be reached right now. Try again in a minute.",
}


class Login(LoginView):
    """/accounts/login/: the provider's button (when configured) beside the
    password form, for directory (LDAP) and local accounts (unless neither is on)."""

    def get_context_data(self, **kwargs):
        accounts = [name for name, on in (("directory (LDAP)", ldap_enabled()), ("local", settings.LOCAL_LOGIN)) if on]
        return {
            **super().get_context_data(**kwargs),
            "oidc_enabled": oidc_enabled(), "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
            "password_login": bool(accounts), "password_accounts": " or ".join(accounts).capitalize() + " account",
            "sso_message": _SSO_MESSAGES.get(self.request.GET.get("sso", "")),
            "ldap_message": login_problem(self.request),
        }


class ProviderFormAction:
    """Adds the provider's origin to the pages' CSP ``form-action``: logging
    out is a form whose answer redirects to the provider's end-session
    endpoint, and browsers hold a form's redirects to ``form-action`` too.
    Placed after django-csp's middleware, so it runs before it on the answer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if oidc_enabled():
            issuer = urlsplit(settings.OIDC_ISSUER)
            update = dict(getattr(response, "_csp_update", None) or {})
            update["form-action"] = [*update.get("form-action", []), f"{issuer.scheme}://{issuer.netloc}"]
            response._csp_update = update
        return response
