"""The HTTP side of webhook deliveries: one POST, bounded in time and in what is read,
to an address the allowlist allows (contracts.webhooks.policy).

Before each request the URL's host is resolved and every address it resolves to must be
allowed (a name resolving to a private or metadata address is refused, retried never).
Redirects are not followed (a 3xx is a failed attempt: the redirect's target was never
checked), proxies from the environment are not used, the whole request (connect to
last byte read) is bounded by WEBHOOK_TIMEOUT_SECONDS, and at most
WEBHOOK_RESPONSE_MAX_BYTES of the answer are read. What remains: the name is resolved
again by the HTTP client, so a DNS server that answers differently within that instant
(DNS rebinding) is not caught here; an egress firewall is the complete answer
(docs/webhooks.md, SSRF).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from contracts.webhooks.policy import WebhookLimits, address_allowed
from services.ports.webhooks import Answer

EXCERPT = 200


def _excerpt(raw: bytes) -> str | None:
    text = raw.decode("utf-8", "replace")
    shown = "".join(c if c.isprintable() else " " for c in text)[:EXCERPT].strip()
    return shown or None


class HttpSender:
    """One shared client (connection pooling) for every delivery of a worker."""

    def __init__(self, limits: WebhookLimits) -> None:
        self._limits = limits
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(limits.timeout_seconds), follow_redirects=False,
            trust_env=False, limits=httpx.Limits(max_connections=limits.in_flight))

    async def close(self) -> None:
        await self._client.aclose()

    async def refused(self, url: str) -> str | None:
        """Why the URL's host may not be reached, or None."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            return f"cannot resolve {host}: {exc}"
        addresses = {str(info[4][0]) for info in infos}
        bad = sorted(a for a in addresses if not address_allowed(host, a, self._limits.allow))
        if bad:
            return (f"{host} resolves to {', '.join(bad)}, which WEBHOOK_ALLOWED_HOSTS "
                    "does not allow")
        return None

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        started = time.monotonic()
        why = await self.refused(url)
        if why is not None:
            # A resolution failure may pass; an address outside the allowlist will not.
            return Answer(None, why[:300], None, 0.0, retryable=why.startswith("cannot"))
        try:
            status, head = await asyncio.wait_for(self._post(url, body, headers),
                                                  self._limits.timeout_seconds)
        except TimeoutError:
            return Answer(None, f"no answer within {self._limits.timeout_seconds:g} s",
                          None, time.monotonic() - started)
        except httpx.HTTPError as exc:
            return Answer(None, f"{type(exc).__name__}: {exc}"[:300], None,
                          time.monotonic() - started)
        failed = None if 200 <= status < 300 else f"HTTP {status}"
        return Answer(status, failed, _excerpt(head), time.monotonic() - started)

    async def _post(self, url: str, body: bytes,
                    headers: Mapping[str, str]) -> tuple[int, bytes]:
        """The status and at most WEBHOOK_RESPONSE_MAX_BYTES of the body."""
        wanted = self._limits.response_max_bytes
        got = bytearray()
        async with self._client.stream("POST", url, content=body,
                                       headers=dict(headers)) as response:
            async for chunk in response.aiter_raw():
                got += chunk
                if len(got) >= wanted:
                    break
        return response.status_code, bytes(got[:wanted])
