"""Gapwatch's 500 page (``handler500``). Django's own draws ``500.html`` without
the request, so a logged-in person would lose the app's navigation; this one
draws it with the request when it can, and without it when drawing fails (the
failure may be the database the navigation and the session read)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseServerError
from django.template.loader import render_to_string


def server_error(request: HttpRequest) -> HttpResponseServerError:
    try:
        page = render_to_string("500.html", request=request)
    except Exception:  # noqa: BLE001 - whatever broke the request may break its page too
        page = render_to_string("500.html")
    return HttpResponseServerError(page)
