"""Webhook delivery: one Celery task per notification a poll recorded."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from celery import shared_task
from django.conf import settings

from groups.domain.webhooks import address_forbidden, webhook_url_problem
from groups.selectors.jobs import notification_pending
from groups.services.notifications import notification_record_attempt

log = logging.getLogger(__name__)


def _destination_problem(url: str) -> str | None:
    """The URL's rule (groups.domain.webhooks), then every address its host
    resolves to now: a public name may point at loopback or a private network."""
    allow_private = settings.WEBHOOK_ALLOW_PRIVATE
    problem = webhook_url_problem(url, allow_private=allow_private)
    if problem or allow_private:
        return problem
    host = urlsplit(url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError as error:
        return None if isinstance(error, socket.gaierror) else f"cannot resolve {host}: {error}"
    forbidden = sorted(a for a in addresses if address_forbidden(a))
    return f"{host} resolves to {', '.join(forbidden)}: webhooks go to public addresses only" if forbidden else None


def _public_peer_connection(address, *args, **kwargs) -> socket.socket:
    """socket.create_connection, refusing a peer the rule forbids: the name
    may resolve elsewhere now than when it was checked (DNS rebinding)."""
    sock = socket.create_connection(address, *args, **kwargs)
    peer = sock.getpeername()[0]
    if address_forbidden(peer):
        sock.close()
        raise OSError(f"{address[0]} connected to {peer}: webhooks go to public addresses only")
    return sock


class _PublicHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _public_peer_connection


class _PublicHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _public_peer_connection  # checked before the TLS handshake


class _PublicHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_PublicHTTPConnection, req)


class _PublicHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_PublicHTTPSConnection, req, context=self._context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A receiver answers; it does not send Gapwatch on (a redirect could name
    any address, past the rule)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} not followed", headers, fp)


def _opener(url: str) -> urllib.request.OpenerDirector:
    """Never follows redirects. The connected address is checked too, unless
    private addresses are allowed or an egress proxy (HTTP(S)_PROXY) makes the
    connection in Gapwatch's stead."""
    parts = urlsplit(url)
    proxied = parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.hostname or "")
    if settings.WEBHOOK_ALLOW_PRIVATE or proxied:
        return urllib.request.build_opener(_NoRedirect)
    return urllib.request.build_opener(_NoRedirect, _PublicHTTPHandler, _PublicHTTPSHandler)


@shared_task(name="gapwatch.send_notification", bind=True, max_retries=None, ignore_result=True)
def send_notification(self, notification_id: int) -> None:
    """POST one webhook; retried with exponential backoff up to WEBHOOK_MAX_ATTEMPTS.
    Never blocks a poll: it runs on its own after the poll committed."""
    notification = notification_pending(notification_id=notification_id)
    if notification is None:
        return
    attempts = notification.attempts + 1
    refused = _destination_problem(notification.url)
    if refused:
        # Final at once: retrying cannot make the destination acceptable.
        notification_record_attempt(notification_id=notification_id, attempts=attempts, error=refused, final=True)
        log.warning("webhook %s not sent: %s", notification_id, refused)
        return
    request = urllib.request.Request(
        notification.url, data=json.dumps(notification.payload).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "gapwatch"},
    )
    try:
        with _opener(notification.url).open(request, timeout=5) as response:
            response.read()
    except (urllib.error.URLError, OSError, ValueError) as error:
        final = attempts >= settings.WEBHOOK_MAX_ATTEMPTS
        notification_record_attempt(notification_id=notification_id, attempts=attempts, error=str(error) or
                                    type(error).__name__, final=final)
        log.warning("webhook %s attempt %d/%d failed: %s", notification_id, attempts,
                    settings.WEBHOOK_MAX_ATTEMPTS, error)
        if not final:
            raise self.retry(countdown=min(300, 2 ** attempts))
        return
    notification_record_attempt(notification_id=notification_id, attempts=attempts)
