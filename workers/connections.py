"""The worker's connections: NATS within a deadline at startup, then staying connected
and saying so.

At startup a server that does not answer within CONNECT_TIMEOUT_SECONDS is a fatal
`StartupFailed` (bootstrap.reachability) naming the variable to fix. Once running, the
opposite holds: NATS is retried without limit (`nats_options`) and MongoDB is its
driver's to reconnect, because an outage of either must end with the worker consuming
again, not sitting idle. `NatsLink` and `MongoWatch` keep what the health endpoint
reports and log each change of state once, never once per attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from faststream.nats.security import NatsCredentials as FastStreamCreds
from faststream.nats.security import NatsNKey, NatsSecurity, NatsToken, NatsUserPassword

from bootstrap.reachability import describe, unreachable
from bootstrap.settings import Settings
from clients.credentials import NatsCredentials
from contracts.shared.persistence import StoreFailure
from contracts.shared.urls import redact
from services.tasks import stop_task
from store.mongo_store import MongoStore

log = logging.getLogger(__name__)


def nats_options(settings: Settings, link: NatsLink) -> dict[str, Any]:
    """Connection options for the worker's NatsBroker (FastStream hands them to nats-py).

    `max_reconnect_attempts=-1`: never give up, whatever the outage lasts; the startup
    deadline is `connect_nats`'s, not nats-py's. Pings every 10 s notice a server that
    vanished without closing the socket within about 30 s instead of nats-py's 4 minutes.
    The inbox prefix is the workers' principal's (clients.inbox), so the replies to their
    pulls and requests reach them alone.
    """
    return {
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": settings.nats_reconnect_wait_seconds,
        "connect_timeout": min(settings.connect_timeout_seconds, 2.0),
        "ping_interval": 10,
        "max_outstanding_pings": 3,
        "error_cb": link.on_error,
        "disconnected_cb": link.on_disconnected,
        "reconnected_cb": link.on_reconnected,
        "closed_cb": link.on_closed,
        "security": broker_security(settings.nats_credentials),
        "inbox_prefix": settings.nats_credentials.inbox_for(settings.nats_url),
    }


def broker_security(creds: NatsCredentials) -> NatsSecurity | None:
    """The same credentials as the clients', in the form FastStream's broker takes them
    (it refuses nats-py's own keyword arguments for them)."""
    tls = creds.tls_context() if creds.uses_tls else None
    if creds.user and creds.password:
        return NatsUserPassword(creds.user, creds.password, ssl_context=tls)
    if creds.token:
        return NatsToken(creds.token, ssl_context=tls)
    if creds.creds_file:
        return FastStreamCreds(str(creds.creds_file), ssl_context=tls)
    if creds.nkey_seed_file:
        return NatsNKey(creds.nkey_seed_file, ssl_context=tls)
    return NatsSecurity(ssl_context=tls) if tls else None


class NatsLink:
    """The worker's view of its NATS connection, fed by nats-py's callbacks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.last_error: BaseException | None = None
        self.failed_attempts = 0
        self._down_since: float | None = None
        self.connected = False
        self.ever_connected = False
        self.stopping = False
        self.closed = False
        """Set at shutdown: the drain that follows is no outage."""

    def problem(self) -> str | None:
        """For /readyz: None while connected."""
        if self.connected:
            return None
        if not self.ever_connected:
            return "connecting"
        if self.closed:
            return "closed for good; restart the worker"
        return f"disconnected; reconnecting ({self.failed_attempts} failed attempts)"

    async def on_error(self, exc: Exception) -> None:
        # Called for every failed attempt while (re)connecting: counted, not logged.
        self.last_error = exc
        self.failed_attempts += 1

    async def on_disconnected(self) -> None:
        if not self.connected:
            return
        self.connected = False
        if self.stopping:
            return
        self._down_since = time.monotonic()
        self.failed_attempts = 0
        log.warning("NATS at %s disconnected; reconnecting without limit", redact(self.url))

    async def on_closed(self) -> None:
        # Only shutdown or an unrecoverable error closes a connection that never gives up.
        self.connected = False
        if not self.stopping and self.ever_connected and not self.closed:
            self.closed = True
            log.error("NATS connection to %s closed for good (%s); restart the worker",
                      redact(self.url),
                      describe(self.last_error, 0) if self.last_error else "no error given")

    async def on_reconnected(self) -> None:
        self.connected = True
        down = time.monotonic() - self._down_since if self._down_since is not None else 0.0
        log.warning("NATS at %s reconnected after %.1f s and %d failed attempts",
                    redact(self.url), down, self.failed_attempts)
        self._down_since = None


async def connect_nats(connect: Callable[[], Awaitable[Any]], link: NatsLink,
                       timeout: float) -> None:
    """Run the broker's `connect` within `timeout`, else fail naming NATS_URL."""
    try:
        await asyncio.wait_for(connect(), timeout)
    except TimeoutError:
        raise unreachable("NATS", "NATS_URL", link.url,
                          describe(link.last_error, timeout)) from None
    except (OSError, nats.errors.Error) as exc:
        # An unrecoverable error (authorization, say) ends the attempts at once.
        raise unreachable("NATS", "NATS_URL", link.url, describe(exc, timeout)) from None
    link.connected = link.ever_connected = True


class MongoWatch:
    """Pings MongoDB every `interval` seconds; `ready` when the last ping answered recently.

    The MongoDB driver reconnects by itself; this only observes, so `/readyz` can say that the
    database is gone and the log says once when it went and when it came back.
    """

    def __init__(self, store: MongoStore, uri: str, interval: float, timeout: float) -> None:
        self._store = store
        self._uri = uri
        self._interval = interval
        self._timeout = timeout
        self._last_ok: float | None = time.monotonic()
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="mongo-watch")

    async def stop(self) -> None:
        await stop_task(self._task)

    def problem(self) -> str | None:
        """None when MongoDB answered a ping within the last three intervals."""
        if self.last_error is not None:
            return self.last_error
        if self._last_ok is None or time.monotonic() - self._last_ok > 3 * self._interval:
            return f"no ping answered in the last {3 * self._interval:g} s"
        return None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self._store.ping(min(self._timeout, self._interval))
            except StoreFailure as exc:
                if self.last_error is None:
                    log.warning("MongoDB at %s does not answer: %s", redact(self._uri),
                                describe(exc, self._timeout))
                self.last_error = describe(exc, self._timeout)
            else:
                if self.last_error is not None:
                    log.warning("MongoDB at %s answers again", redact(self._uri))
                self.last_error = None
                self._last_ok = time.monotonic()
