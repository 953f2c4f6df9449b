"""Pages as a person uses them through Django's test client: logged in as
a user, previewing a repair and approving exactly what the preview showed."""

from __future__ import annotations

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
