"""Opening what the console needs, once when it starts: the ledger (through the
bootstrap), NATS connected from the start for the live stream, the operator client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bootstrap.ledger import OPERATOR, open_ledger
from bootstrap.nats_source import LazyNats
from bootstrap.settings import Settings
from console.deps import Deps
from console.live import Hub


@asynccontextmanager
async def open_deps(settings: Settings, operator_name: str) -> AsyncIterator[Deps]:
    """The routes' dependencies for as long as the console serves; closed after."""
    ledger = open_ledger(settings, LazyNats(settings, reconnect=True), OPERATOR)
    try:
        nc = await ledger.nats.client()
        yield Deps.of(ledger, await ledger.operator(operator_name), Hub(nc), operator_name)
    finally:
        await ledger.close()
