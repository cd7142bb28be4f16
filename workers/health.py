"""`/healthz` and `/readyz` for a supervisor, served from the worker's own event loop.

A few lines of HTTP/1.1 over `asyncio.start_server` rather than a web framework: two
GET paths, a JSON body, `Connection: close`. Because the responder runs on the same
loop as the consumers, an answer to `/healthz` is itself the proof that the loop is
not blocked. Whatever a client sends, a request costs at most `MAX_REQUEST` bytes and
`REQUEST_TIMEOUT` seconds, and at most `MAX_CLIENTS` are served at once; anything
else is answered 400 (or dropped) without raising.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_REQUEST = 8 * 1024
"""Largest request head read; a longer one is answered 400."""
REQUEST_TIMEOUT = 5.0
MAX_CLIENTS = 32
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Check = Callable[[], str | None]
"""A readiness condition: None when met, else why not (one short sentence)."""

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}


@dataclass(frozen=True)
class Readiness:
    """Named checks, all of which must pass for `/readyz` to answer 200."""

    checks: Mapping[str, Check]

    def report(self) -> tuple[bool, dict[str, object]]:
        problems: dict[str, str] = {}
        for name, check in self.checks.items():
            try:
                problem = check()
            except Exception as exc:  # a broken check is a "not ready", never a crash
                problem = f"check failed: {type(exc).__name__}"
            if problem is not None:
                problems[name] = problem
        ready = not problems
        body: dict[str, object] = {"status": "ready" if ready else "not ready",
                                   "checks": {name: problems.get(name, "ok")
                                              for name in self.checks}}
        return ready, body


class HealthServer:
    def __init__(self, readiness: Readiness,
                 metrics: Callable[[], bytes] | None = None) -> None:
        self._readiness = readiness
        self._metrics = metrics
        self._server: asyncio.Server | None = None
        self._clients = 0

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; returns the bound address (port 0 picks a free one)."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_REQUEST)
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients += 1
        try:
            if self._clients <= MAX_CLIENTS:
                status, body = await self._answer(reader)
                kind = "application/json"
                if isinstance(body, bytes):  # /metrics: Prometheus text exposition
                    payload, kind = body, METRICS_TYPE
                else:
                    payload = b"" if body is None else json.dumps(body).encode()
                writer.write(
                    f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                    f"Content-Type: {kind}\r\nContent-Length: {len(payload)}\r\n"
                    f"Cache-Control: no-store\r\nConnection: close\r\n\r\n".encode() + payload)
                await asyncio.wait_for(writer.drain(), REQUEST_TIMEOUT)
        except Exception:  # a client that vanished or stalls; nothing to report
            log.debug("health request dropped", exc_info=True)
        finally:
            self._clients -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _answer(self, reader: asyncio.StreamReader
                      ) -> tuple[int, dict[str, object] | bytes | None]:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, ValueError):
            return 400, {"error": "bad request"}
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return 400, {"error": "bad request"}
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target not in (b"/healthz", b"/readyz", b"/metrics"):
            return 404, {"error": "not found", "paths": ["/healthz", "/readyz", "/metrics"]}
        if method not in (b"GET", b"HEAD"):
            return 405, {"error": "method not allowed"}
        status, body = self._respond(target)
        return status, (None if method == b"HEAD" else body)

    def _respond(self, target: bytes) -> tuple[int, dict[str, object] | bytes]:
        if target == b"/metrics":
            if self._metrics is None:
                return 404, {"error": "not found", "paths": ["/healthz", "/readyz"]}
            return 200, self._metrics()
        if target == b"/healthz":
            return 200, {"status": "alive"}
        ready, report = self._readiness.report()
        return (200 if ready else 503), report
