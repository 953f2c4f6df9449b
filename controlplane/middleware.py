"""Request checks that hold for every page and API call, in one place.

- ``RejectNulMiddleware``: a NUL byte in a query parameter, form field or JSON
  body is refused with a 400 before any view (PostgreSQL cannot store it, so
  it would otherwise end as a 500 deep inside a query); a cookie holding one
  is ignored. A body over DATA_UPLOAD_MAX_MEMORY_SIZE is a readable (API:
  JSON) 400 too.
- ``ApiAuthenticationMiddleware``: an API request is authenticated before
  CSRF is checked, so a client without credentials gets the documented 401
  JSON, never Django's 403 CSRF page.
- ``RoleRequiredMiddleware``: a logged-in user in no role (neither viewer nor
  approver, not a superuser) sees only a "no access" page (API: 403 JSON).
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from groups.roles import has_role

# Paths a user without a role may still reach: logging in and out, static files, health.
# The admin is not among them: a staff account in no role would read every finding there.
_OPEN_PREFIXES = ("/accounts/", "/oidc/", "/static/", "/healthz", "/admin/login/", "/admin/logout/")


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _refuse(request: HttpRequest, status: int, message: str) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"error": message}, status=status)
    page = render_to_string("refused.html", {"status": status, "message": message}, request=request)
    return HttpResponse(page, status=status)


def _nul_in(data) -> str | None:
    """The first parameter whose name or value holds a NUL byte."""
    for key, values in data.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            return key
    return None


class RejectNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Django decodes octal escapes in quoted cookies ("\000"): a session
        # cookie with a NUL would reach the session table. Such a cookie is
        # dropped, not refused, so a cookie planted by a sibling domain cannot
        # lock a browser out of Gapwatch.
        if any("\x00" in name or "\x00" in value for name, value in request.COOKIES.items()):
            request.COOKIES = {name: value for name, value in request.COOKIES.items()
                               if "\x00" not in name and "\x00" not in value}
        try:
            where = self._nul_at(request)
        except (RequestDataTooBig, TooManyFieldsSent) as error:
            # Django would answer these with a bare HTML 400; API clients get JSON.
            where, message = "body", f"the request is too large: {error}"
        else:
            if where is None:
                return self.get_response(request)
            message = f"a NUL byte (\\x00) is not allowed: {where!r}"
        if _is_api(request):
            return JsonResponse({"error": message, "parameter": where}, status=400)
        return _refuse(request, 400, message)

    @staticmethod
    def _nul_at(request: HttpRequest) -> str | None:
        """Where a NUL byte is: a parameter's name, "path" or "body"; None if nowhere."""
        if "\x00" in request.path:
            return "path"
        where = _nul_in(request.GET)
        if where is None and request.method in ("POST", "PUT", "PATCH"):
            if request.content_type == "application/x-www-form-urlencoded":
                return _nul_in(request.POST)
            body = request.body
            # Raw NUL, or JSON's escaped form of it.
            if b"\x00" in body or b"\\u0000" in body.lower():
                return "body"
        return where


class ApiAuthenticationMiddleware:
    """Placed before CsrfViewMiddleware: its ``process_view`` runs first."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        # Reads need no CSRF token: their views answer 401 themselves.
        if _is_api(request) and request.method not in ("GET", "HEAD", "OPTIONS") \
                and not request.user.is_authenticated:
            return JsonResponse(
                {"error": "authentication required: log in or send Authorization: Bearer <token>"}, status=401
            )
        return None


class RoleRequiredMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        if user.is_authenticated and not request.path.startswith(_OPEN_PREFIXES):
            if not has_role(user):
                return _refuse(request, 403, "no access: your account has no role in Gapwatch; ask an "
                                             "administrator to add it to the viewer or approver group")
            # Checked once per request; the page header reads it (groups.web.context).
            request.has_gapwatch_role = True
        return self.get_response(request)
