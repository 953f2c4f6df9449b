"""Pages as a person uses them through Django's test client: logged in as
a user, previewing a repair and approving exactly what the preview showed."""

from __future__ import annotations

import json
import re

from django.contrib.auth.models import User
from django.test import Client


def client_for(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def previewed(client: Client, kind: str, values: dict) -> str:
    """The fingerprint the preview of ``values`` renders into its approve form."""
    body = client.get(f"/findings/{kind}", values).content.decode()
    return re.search(r'name="previewed" value="([^"]*)"', body).group(1)


def approve(client: Client, kind: str, values: dict):
    """What a person does: preview ``values``, then press Approve."""
    return client.post(f"/findings/{kind}/approve", {**values, "previewed": previewed(client, kind, values)})


def get_json(client: Client, path: str, params: dict | None = None, status: int = 200) -> dict:
    """The JSON answer of a GET of ``path``, which must have ``status``."""
    response = client.get(path, params or {})
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    return json.loads(response.content)


def post_json(client: Client, path: str, body, **extra):
    """A POST of ``body`` (JSON-encoded unless it is text already) to ``path``."""
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", **extra)
