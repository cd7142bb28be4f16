"""`await Client.connect(url)` and `async with Client.connect(url)` from one method.

Agents written as one long coroutine want the first; scripts want the second, so the
connection is closed however they exit.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

import nats
from nats.aio.client import Client

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
"""What `agents up` listens on."""


class Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class Connecting(Generic[C]):
    """Opens a NATS connection and wraps it in the client `wrap` builds, which owns it."""

    def __init__(self, url: str, wrap: Callable[[Client], C]) -> None:
        self._url = url
        self._wrap = wrap
        self._client: C | None = None

    async def _open(self) -> C:
        return self._wrap(await nats.connect(self._url))

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
