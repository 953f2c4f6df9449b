"""Encryption at rest for secrets (SASL passwords), with Fernet.

The key comes from settings.FIELD_ENCRYPTION_KEY: either a Fernet key, or any
string from which one is derived with SHA-256.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class SecretUnreadable(Exception):
    """The stored secret was encrypted with another key."""


def _fernet() -> Fernet:
    raw = settings.FIELD_ENCRYPTION_KEY
    try:
        return Fernet(raw)
    except ValueError:
        return Fernet(base64.urlsafe_b64encode(hashlib.sha256(raw.encode()).digest()))


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY") from None
