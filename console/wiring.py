"""Opening what the console needs, once when it starts: the ledger (through the
bootstrap), NATS connected from the start for the live stream, the operator client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bootstrap.ledger import OPERATOR, Ledger, open_ledger
from bootstrap.nats_source import LazyNats
from bootstrap.settings import Settings
from clients.operator import CorrectionClient
from console.deps import Deps
from console.live import Hub


async def operator_client(ledger: Ledger, principal: str) -> CorrectionClient:
    """The one place the console builds its operator client: every correction command
    it sends (request, dry run, cancel, fail, retry) goes through this client, in the
    name of `principal` (CONSOLE_PRINCIPAL). Signing those writes with the principal's
    key belongs here, so every route signs without knowing it."""
    return await ledger.operator(principal)


@asynccontextmanager
async def open_deps(settings: Settings, principal: str) -> AsyncIterator[Deps]:
    """The routes' dependencies for as long as the console serves; closed after."""
    ledger = open_ledger(settings, LazyNats(settings, reconnect=True), OPERATOR)
    try:
        nc = await ledger.nats.client()
        yield Deps.of(ledger, await operator_client(ledger, principal), Hub(nc), principal)
    finally:
        await ledger.close()
