"""Every transaction of the store starts here, so a dead worker's can be ended by another.

`run_in_transaction` opens a session, lets the client's session hook note it (the
worker registry, store.workers: it must know the session before the transaction
takes any lock) and runs the callback under `with_transaction`, which retries it on
transient errors; callbacks must therefore be idempotent (they are: they recompute
everything from the session's reads).

The hook is kept per client object (by identity: clients to the same server compare
equal), so tests and tools that use a client without a registry (the CLI, bench
loaders) run transactions as before. The worker removes its hook when it closes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from pymongo import AsyncMongoClient, ReadPreference, WriteConcern
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.read_concern import ReadConcern

from store.database import Document

T = TypeVar("T")

TRANSACTION_READ_CONCERN = ReadConcern("snapshot")
"""Every read of a transaction sees one majority-committed point in time (with a
majority commit), so a correction decides from a consistent tree."""
TRANSACTION_WRITE_CONCERN = WriteConcern("majority", j=True)
"""The commit returns once a majority journaled it: a failover cannot undo it."""

SessionHook = Callable[[AsyncClientSession], Awaitable[None]]

_hooks: dict[int, SessionHook] = {}


def on_new_session(client: AsyncMongoClient[Document], hook: SessionHook | None) -> None:
    """Call `hook` with every session before its transaction (None: stop)."""
    if hook is None:
        _hooks.pop(id(client), None)
    else:
        _hooks[id(client)] = hook


async def run_in_transaction(client: AsyncMongoClient[Document],
                             callback: Callable[[AsyncClientSession], Awaitable[T]]) -> T:
    async with client.start_session() as session:
        hook = _hooks.get(id(client))
        if hook is not None:
            await hook(session)
        result: T = await session.with_transaction(
            callback, read_concern=TRANSACTION_READ_CONCERN,
            write_concern=TRANSACTION_WRITE_CONCERN,
            read_preference=ReadPreference.PRIMARY)
        return result
