"""`await Client.connect(url)` and `async with Client.connect(url)` from one method.

Agents written as one long coroutine want the first; scripts want the second, so the
connection is closed however they exit.

Connecting is bounded: a server that does not answer within `connect_timeout` (10 s)
raises `NatsUnreachable` naming it, where nats-py alone would try 60 times 2 s apart.
Once connected, the connection is retried without limit through an outage, so a
long-running agent never holds a dead client; publishes meanwhile are retried by
`RetryPolicy` and end in `PublishFailed` if the outage outlasts it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

import nats
import nats.errors
from nats.aio.client import Client

from clients.credentials import NatsCredentials
from contracts.shared.urls import nats_servers, redact

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
"""What `agents up` listens on."""

CONNECT_TIMEOUT = 10.0
"""Seconds `connect` keeps trying before it raises NatsUnreachable."""


class NatsUnreachable(ConnectionError):
    """No NATS server answered within the connect timeout; the message names the URL
    (without its password) and the last error."""


async def connect_bounded(url: str, timeout: float = CONNECT_TIMEOUT,
                          credentials: NatsCredentials | None = None) -> Client:
    """A connection that reconnects without limit once made, made within `timeout`;
    `credentials` add a user, token, creds or nkey file and TLS to what `url` holds, and
    say the inbox prefix (clients.inbox: the principal's own, where its replies arrive)."""
    last: list[BaseException] = []

    async def note(exc: Exception) -> None:
        # nats-py reports each failed attempt here (and logs it when no callback is set).
        # A refused password is the news; the resets of the retries after it are not.
        if not (last and _refused(last[0])):
            last[:] = [exc]

    creds = credentials or NatsCredentials()
    try:
        return await asyncio.wait_for(
            nats.connect(nats_servers(url), max_reconnect_attempts=-1,
                         connect_timeout=min(timeout, 2.0), error_cb=note,
                         inbox_prefix=creds.inbox_for(url), **creds.options()),
            timeout)
    except TimeoutError:
        reason = _reason(last[0]) if last else f"no answer within {timeout:g} s"
    except (OSError, nats.errors.Error) as exc:
        reason = _reason(exc)
    raise NatsUnreachable(f"cannot reach NATS at {redact(url)}: {reason}")


def _refused(exc: BaseException) -> bool:
    return "authorization violation" in str(exc).lower()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno).lower()
    return redact(str(exc) or type(exc).__name__)[:200]


class Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class Connecting(Generic[C]):
    """Opens a NATS connection and wraps it in the client `wrap` builds, which owns it."""

    def __init__(self, url: str, wrap: Callable[[Client], C],
                 connect_timeout: float = CONNECT_TIMEOUT,
                 credentials: NatsCredentials | None = None) -> None:
        self._url = url
        self._wrap = wrap
        self._timeout = connect_timeout
        self._credentials = credentials
        self._client: C | None = None

    async def _open(self) -> C:
        return self._wrap(await connect_bounded(self._url, self._timeout, self._credentials))

    def __await__(self) -> Generator[Any, None, C]:
        return self._open().__await__()

    async def __aenter__(self) -> C:
        self._client = await self._open()
        return self._client

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._client is not None:
            await self._client.close()


class ConnectionOwner:
    """A client over a NATS connection that it may own: closing drains an owned
    connection and only flushes a borrowed one, so a caller's connection stays open."""

    def __init__(self, nc: Client, *, owns_connection: bool) -> None:
        self._nc = nc
        self._owns = owns_connection

    @property
    def connection(self) -> Client:
        """The NATS connection this client publishes on (for subscriptions beside it)."""
        return self._nc

    async def close(self) -> None:
        if self._owns:
            await self._nc.drain()
        else:
            await self._nc.flush()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()
