"""The JSON API, mounted at /api/v1/ by controlplane/urls.py.

Each of ninja's views is wrapped once, for what ninja does differently from
the API's documented behaviour: HEAD is answered like GET, a wrong method is
a 405 in JSON (not ninja's text), and no answer is cached. An unknown path
under /api/v1/ is a JSON 404, not the HTML page.

``docs`` is the interactive documentation (Swagger UI) for people logged in:
django-ninja's own copy of Swagger UI, served from this server's static
files (``ninja`` is an installed app for them), never from a CDN.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, path, re_path, reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET
from ninja.openapi.docs import Swagger

from groups.api.main import api


def _documented(view):
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # WSGI servers and Django's test client drop a HEAD answer's body.
        head = request.method == "HEAD"
        if head:
            request.method = "GET"
        try:
            response = view(request, *args, **kwargs)
        except Http404:  # ninja's root view
            response = _unknown(request)
        if head:
            request.method = "HEAD"
        if isinstance(response, HttpResponseNotAllowed):
            allowed = [method.strip() for method in response["Allow"].split(",")]
            if "GET" in allowed:
                allowed.append("HEAD")
            response = JsonResponse({"error": f"method {request.method} not allowed"}, status=405)
            response["Allow"] = ", ".join(allowed)
        add_never_cache_headers(response)
        return response

    return wrapper


def _unknown(request: HttpRequest, path: str = "") -> JsonResponse:
    return JsonResponse({"error": f"no API endpoint {request.path}"}, status=404)


def _wrapped(pattern: URLPattern) -> URLPattern:
    pattern.callback = _documented(pattern.callback)
    return pattern


class _LocalSwagger(Swagger):
    """Swagger UI reading the API's own ``schema`` operation (behind the same login)."""

    def get_openapi_url(self, api, path_params) -> str:
        return reverse("api:schema")


@login_required
@require_GET
def docs(request: HttpRequest) -> HttpResponse:
    return _LocalSwagger().render_page(request, api)


_patterns, _app, _namespace = api.urls
app_name = "api"  # ninja reverses its own views in the namespace urls_namespace names
urlpatterns = [
    *(_wrapped(pattern) for pattern in _patterns),
    path("docs", docs, name="docs"),
    re_path(r"^(?P<path>.*)$", _unknown),
]
