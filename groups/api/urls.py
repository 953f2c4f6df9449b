"""The JSON API, mounted at /api/v1/ by controlplane/urls.py.

Each of ninja's views is wrapped once, for what ninja does differently from
the API's documented behaviour: HEAD is answered like GET, a wrong method is
a 405 in JSON (not ninja's text), and no answer is cached.
"""

from __future__ import annotations

from functools import wraps

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern
from django.utils.cache import add_never_cache_headers

from groups.api.main import api


def _documented(view):
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # WSGI servers and Django's test client drop a HEAD answer's body.
        if request.method == "HEAD":
            request.method = "GET"
            response = view(request, *args, **kwargs)
            request.method = "HEAD"
        else:
            response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = [method.strip() for method in response["Allow"].split(",")]
            if "GET" in allowed:
                allowed.append("HEAD")
            response = JsonResponse({"error": f"method {request.method} not allowed"}, status=405)
            response["Allow"] = ", ".join(allowed)
        add_never_cache_headers(response)
        return response

    return wrapper


def _wrapped(pattern: URLPattern) -> URLPattern:
    pattern.callback = _documented(pattern.callback)
    return pattern


_patterns, _app, _namespace = api.urls
app_name = "api"  # ninja reverses its own views in the namespace urls_namespace names
urlpatterns = [_wrapped(pattern) for pattern in _patterns]
