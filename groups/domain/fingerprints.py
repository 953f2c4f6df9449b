"""The one fingerprint of what an approval decides (a remediation's preview,
``groups.domain.approval``; an expansion's plan, ``groups.domain.expansion.job``):
the hash of the decided values as canonical JSON. A plain hash, not a
secret: it catches change between what a screen showed and what is
approved, not forgery. No Django, no Kafka."""

from __future__ import annotations

import hashlib
import json


def fingerprint(decided: object) -> str:
    """SHA-256 (hex) of ``decided`` as JSON with sorted keys and no spaces:
    the same values give the same fingerprint in any order of their keys. A
    value JSON cannot hold raises TypeError (a bug, not hashed text)."""
    return hashlib.sha256(json.dumps(decided, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
