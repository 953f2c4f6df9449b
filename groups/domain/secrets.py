"""The one rule for keeping secrets out of text we store, log or show:
every occurrence of a known secret becomes ``***``.

Used wherever a client error, a Spark log tail or a connection-test message
could quote the configuration it was given (a SASL password).
"""

from __future__ import annotations

REDACTED = "***"


def secret_redact(text: str, *secrets: str | None) -> str:
    """``text`` with each non-empty secret replaced by ``***``. Longer secrets
    first, so one that contains another is never left half-visible."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
