"""Where Gapwatch may send a webhook: http(s) to a public address. A webhook
to loopback, a private network or a link-local address (cloud metadata) would
let whoever edits a cluster make Gapwatch call its own Redis, database or
neighbours; WEBHOOK_ALLOW_PRIVATE permits it for a closed network."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def address_forbidden(address: str) -> bool:
    """True for loopback, private, link-local, multicast, reserved and unspecified addresses."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def webhook_url_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` is not an acceptable webhook, or None when it is. A host
    name is judged again by its addresses when the webhook is sent."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "A webhook is an http:// or https:// URL with a host."
    if parts.username or parts.password:
        return "A webhook URL must not carry a user or password; use a secret path or a header at the receiver."
    if allow_private:
        return None
    host = parts.hostname
    if host == "localhost" or host.endswith(".localhost") or address_forbidden(host):
        return f"{host} is a loopback, private or link-local address; webhooks go to public addresses only."
    return None
