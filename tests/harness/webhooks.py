"""A local HTTP server standing in for a remote webhook receiver (the one
outside service the tests fake: see STYLE.md rule 10)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class WebhookReceiver:
    """Listening on a free loopback port once constructed (the socket is bound
    before the constructor returns), served from a daemon thread until
    ``close``. Every request's method goes to ``hits`` and each JSON body
    it accepts to ``received``; it answers 204, or 500 with ``fail``, or a
    302 to ``redirect_to``."""

    def __init__(self, *, fail: bool = False, redirect_to: str | None = None) -> None:
        self.received: list[dict] = []
        self.hits: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                receiver.hits.append(self.command)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if fail:
                    self.send_response(500)
                elif redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to)
                else:
                    if body:
                        receiver.received.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
