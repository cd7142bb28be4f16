"""HTTP receivers for the webhook tests, in this process on a free loopback port: one that
verifies every delivery with the Standard Webhooks library and keeps it, one that never
answers in time, one that answers 500, one that answers bytes that are not HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

from deploy.embedded import free_port


@dataclass
class Received:
    """What the receivers saw, per path."""

    secrets: dict[str, str] = field(default_factory=dict)
    """path -> the webhook's secret (set once the webhook is added)."""
    verified: dict[str, list[tuple[dict[str, str], Any]]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)
    """Requests whose body ended before its content-length: the sender gave up mid-send
    (its timeout, on a loaded machine), so there was nothing whole to verify."""
    hits: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, path: str) -> int:
        with self.lock:
            return self.hits.get(path, 0)


def _handler(seen: Received, slow_seconds: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            with seen.lock:
                seen.hits[self.path] = seen.hits.get(self.path, 0) + 1
                if len(body) < length:
                    seen.cut.append(f"{self.path}: {len(body)} of {length} bytes")
            if len(body) < length:
                return None
            if self.path == "/slow":
                time.sleep(slow_seconds)
                return self._answer(200, b"too late")
            if self.path == "/fail":
                return self._answer(500, b"x" * 100_000)  # read at most a few KB of it
            if self.path == "/garbage":
                self.wfile.write(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")
                self.close_connection = True
                return None
            return self._verify(body)

        def _verify(self, body: bytes) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                payload = Webhook(seen.secrets[self.path]).verify(body, headers)
            except (WebhookVerificationError, KeyError, ValueError) as exc:
                with seen.lock:
                    seen.refused.append(f"{self.path}: {exc} ({len(body)} bytes, "
                                        f"id {headers.get('webhook-id')}, "
                                        f"at {headers.get('webhook-timestamp')})")
                return self._answer(401, b"bad signature")
            with seen.lock:
                seen.verified.setdefault(self.path, []).append((headers, payload))
            return self._answer(204, b"")

        def _answer(self, code: int, body: bytes) -> None:
            try:
                self.send_response(code)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the ledger gave up first (the slow receiver)

    return Handler


class Receivers:
    def __init__(self, slow_seconds: float) -> None:
        self.seen = Received()
        self.port = free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port),
                                           _handler(self.seen, slow_seconds))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Receivers:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def refusing_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def receivers(slow_seconds: float) -> Iterator[Receivers]:
    with Receivers(slow_seconds) as r:
        yield r
