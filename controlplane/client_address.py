"""Who is asking: the client's IP address, believing forwarding headers only
from the reverse proxies listed in TRUSTED_PROXIES. Used by /metrics (loopback
scrapes) and by django-axes (login lockouts per address)."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

# Headers proxies and CDNs use to pass on the client's address. A request that
# carries one came through a proxy, even if the proxy connects from loopback;
# only a proxy listed in TRUSTED_PROXIES is believed about who the client is.
_FORWARDING_HEADERS = (
    "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP", "HTTP_FORWARDED", "HTTP_X_CLIENT_IP", "HTTP_CLIENT_IP",
    "HTTP_TRUE_CLIENT_IP", "HTTP_CF_CONNECTING_IP", "HTTP_X_CLUSTER_CLIENT_IP", "HTTP_FASTLY_CLIENT_IP",
    "HTTP_X_ORIGINAL_FORWARDED_FOR", "HTTP_X_FORWARDED", "HTTP_FORWARDED_FOR",
)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address) -> bool:
    return address is not None and any(address in network for network in settings.TRUSTED_PROXIES)


def client_address(request: HttpRequest):
    """The client's address: REMOTE_ADDR; behind a proxy listed in
    TRUSTED_PROXIES, the right-most X-Forwarded-For entry that is not one of
    them. None when it cannot be known (a proxy nobody configured, or a
    trusted one that names no client)."""
    address = _address(request.META.get("REMOTE_ADDR", ""))
    if _trusted(address):
        hops = [_address(hop) for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
        untrusted = [hop for hop in hops if not _trusted(hop)]
        # Every hop a trusted proxy: the left-most is the client itself.
        return untrusted[-1] if untrusted else (hops[0] if hops else None)
    if any(header in request.META for header in _FORWARDING_HEADERS):
        return None
    return address


def client_address_text(request: HttpRequest) -> str | None:
    """For django-axes (AXES_CLIENT_IP_CALLABLE): ``client_address``, or the
    connecting address when the client cannot be known (a lockout then holds
    for everyone behind that unconfigured proxy, which errs on the safe side)."""
    address = client_address(request) or _address(request.META.get("REMOTE_ADDR", ""))
    return None if address is None else str(address)
