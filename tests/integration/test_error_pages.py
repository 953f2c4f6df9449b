"""Gapwatch's own 404, 403 and 500 pages, as served with DEBUG off (pytest-django
answers every request with DEBUG off, as `make up` now runs): the app's
navigation for a logged-in person, nothing of the app for a visitor, and never
Django's debug page with its URL patterns or an exception's text."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import path

from controlplane.urls import handler500, urlpatterns as app_urlpatterns

SECRET_DETAIL = "password=hunter2 in a traceback"


def _fail(request):
    raise RuntimeError(SECRET_DETAIL)


# This module is the URL configuration of the 500 tests: the app's, and one view that fails.
urlpatterns = [path("fail/", _fail), *app_urlpatterns]
__all__ = ["handler500", "urlpatterns"]

NAVIGATION = 'aria-label="main"'
DEBUG_PAGE_MARKS = ("Using the URLconf", "Traceback", "DEBUG = True", "api/v1/")


def _assert_not_revealing(body: str) -> None:
    for mark in DEBUG_PAGE_MARKS:
        assert mark not in body, mark


def test_a_visitor_gets_gapwatchs_404_without_the_apps_navigation(client, db):
    response = client.get("/no/such/page/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in body
    assert NAVIGATION not in body and "Findings</a>" not in body
    assert 'href="/accounts/login/"' in body
    _assert_not_revealing(body)


def test_a_logged_in_person_gets_the_404_with_the_apps_navigation(viewer_client):
    response = viewer_client.get("/findings/999999/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in body
    assert NAVIGATION in body
    assert "No Finding matches" not in body  # the lookup's own message is not the reader's business
    _assert_not_revealing(body)


def test_a_refusal_is_gapwatchs_403_saying_what_the_act_needs(viewer_client):
    response = viewer_client.get("/findings/approve", {"ids": "1", "kind": "reset"})
    body = response.content.decode()
    assert response.status_code == 403
    assert "<h1>Not allowed</h1>" in body
    assert "approving remediations needs the approver role" in body
    assert NAVIGATION in body


@pytest.fixture
def failing_urls(settings):
    settings.ROOT_URLCONF = __name__


def test_a_visitor_gets_gapwatchs_500_without_the_error_or_navigation(failing_urls, db):
    response = Client(raise_request_exception=False).get("/fail/")
    body = response.content.decode()
    assert response.status_code == 500
    assert "<h1>Something went wrong</h1>" in body
    assert SECRET_DETAIL not in body and "RuntimeError" not in body
    assert NAVIGATION not in body
    _assert_not_revealing(body)


def test_a_logged_in_person_gets_the_500_with_the_apps_navigation(failing_urls, viewer):
    client = Client(raise_request_exception=False)
    client.force_login(viewer)
    response = client.get("/fail/")
    body = response.content.decode()
    assert response.status_code == 500
    assert NAVIGATION in body and viewer.username in body
    assert SECRET_DETAIL not in body


def test_the_500_page_still_answers_when_its_navigation_cannot_be_read(failing_urls, viewer, monkeypatch):
    def database_gone(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr("groups.web.context.clusters_freshness", database_gone)
    client = Client(raise_request_exception=False)
    client.force_login(viewer)
    response = client.get("/fail/")
    body = response.content.decode()
    assert response.status_code == 500
    assert "<h1>Something went wrong</h1>" in body
    assert NAVIGATION not in body
    assert "database went away" not in body


def test_every_page_names_the_icon_that_is_served(client, db):
    """A favicon (the issue's 'no favicon'): every page links it, and the static files have it."""
    from django.conf import settings
    from django.contrib.staticfiles import finders

    page = client.get("/accounts/login/").content.decode()
    href = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)"', page).group(1)
    found = finders.find(href.removeprefix(settings.STATIC_URL))
    assert found and "<title>Gapwatch</title>" in open(found).read()
