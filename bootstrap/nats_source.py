"""Where an opened ledger gets its NATS connection: given (the workers' broker already
holds one), or made on first use (a CLI command that only reads never connects, so it
works with NATS down).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import nats
import nats.errors
from nats.aio.client import Client

from bootstrap.reachability import describe
from bootstrap.settings import Settings
from contracts.shared.urls import nats_servers

__all__ = ["ConnectedNats", "LazyNats", "NatsSource", "NatsUnavailable"]

CONNECT_TIMEOUT = 2.0
"""Per attempt: an operator who forgot `agents up` should learn it in seconds."""


class NatsUnavailable(Exception):
    """Connecting to NATS failed; the message is the cause, short (`describe`)."""


class NatsSource(Protocol):
    async def client(self) -> Client:
        """The connection, connected; NatsUnavailable when it cannot be made."""
        ...

    async def close(self) -> None:
        """Drain and close it if this source made it; a given one is its owner's."""
        ...


class ConnectedNats:
    """A connection someone else made and closes (the workers' broker, a test's)."""

    def __init__(self, get: Callable[[], Client]) -> None:
        self._get = get

    async def client(self) -> Client:
        return self._get()

    async def close(self) -> None:
        return None


async def _quiet(*_: object) -> None:
    # nats-py reports every failed attempt through its callbacks (and logs each one when
    # none is given); the one line the caller prints is the whole story.
    return None


class LazyNats:
    """Connects on the first `client()`, with the settings' URL and credentials.

    `reconnect`: keep reconnecting without limit once connected (the web console, which
    runs for days); without it a connection that drops stays down (a CLI command, which
    reports the failure and exits)."""

    def __init__(self, settings: Settings, *, reconnect: bool) -> None:
        self._settings = settings
        self._reconnect = reconnect
        self._nc: Client | None = None

    async def client(self) -> Client:
        if self._nc is None:
            options = ({"max_reconnect_attempts": -1} if self._reconnect else
                       {"allow_reconnect": False, "max_reconnect_attempts": 1,
                        "error_cb": _quiet, "disconnected_cb": _quiet, "closed_cb": _quiet})
            creds, url = self._settings.nats_credentials, self._settings.nats_url
            try:
                # The principal's own inbox prefix (clients.inbox): its replies reach it
                # alone under per-principal permissions.
                self._nc = await nats.connect(
                    nats_servers(url), connect_timeout=CONNECT_TIMEOUT,
                    inbox_prefix=creds.inbox_for(url), **options, **creds.options())
            except (OSError, TimeoutError, nats.errors.Error) as exc:
                raise NatsUnavailable(describe(exc, CONNECT_TIMEOUT)) from None
        return self._nc

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        if nc is None:
            return
        try:
            await nc.drain()
        except Exception:  # closing must not hide the outcome it follows
            await nc.close()
