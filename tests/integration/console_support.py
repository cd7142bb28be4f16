"""The console served for real (uvicorn on a free port, in the test's event loop) over the
test's MongoDB and NATS, for the API tests (httpx) and the browser tests (Playwright)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from console.api import Deps
from console.app import run_console
from console.config import ConsoleConfig
from console.live import Hub
from deploy.embedded import free_port
from store.database import Document
from workers.publisher import JetStreamPublisher

OPERATOR = "tester"


@dataclass
class Console:
    url: str
    deps: Deps


@asynccontextmanager
async def serve_console(db: AsyncDatabase[Document], nc: nats.NATS,
                        token: str | None = None) -> AsyncIterator[Console]:
    deps = Deps(db=db, ops=CorrectionClient(nc, requested_by=OPERATOR),
                publisher=lambda: JetStreamPublisher(nc, ack_timeout=5.0), hub=Hub(nc),
                operator_name=OPERATOR)

    @asynccontextmanager
    async def connect() -> AsyncIterator[Deps]:
        yield deps

    config = ConsoleConfig(port=free_port(), token=token)
    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.create_task(run_console(config, connect, stop, ready.set))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    try:
        yield Console(config.url.rstrip("/"), deps)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.fixture
async def console(db: AsyncDatabase[Document], nc: nats.NATS) -> AsyncIterator[Console]:
    async with serve_console(db, nc) as c:
        yield c
