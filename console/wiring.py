"""Opening what the console needs (MongoDB, NATS, the operator client), once per process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import nats

from clients._publish import RetryPolicy
from clients.operator import CorrectionClient
from console.api import Deps, PublisherFactory
from console.live import Hub
from contracts.shared.urls import nats_servers
from store.database import connect as mongo_connect

MONGO_TIMEOUT_MS = 3000


@asynccontextmanager
async def open_deps(*, nats_url: str, nats_options: dict[str, Any], mongodb_uri: str,
                    mongodb_db: str, publisher: Any, operator_name: str
                    ) -> AsyncIterator[Deps]:
    """`publisher(nc)` makes the EventPublisher the invariant service announces with (the
    CLI passes the workers' JetStream publisher)."""
    client = mongo_connect(mongodb_uri, serverSelectionTimeoutMS=MONGO_TIMEOUT_MS,
                           connectTimeoutMS=MONGO_TIMEOUT_MS)
    nc = await nats.connect(nats_servers(nats_url), connect_timeout=2.0,
                            max_reconnect_attempts=-1, **nats_options)
    try:
        ops = CorrectionClient(nc, requested_by=operator_name,
                               retry=RetryPolicy(attempts=3, ack_timeout=2.0))
        factory: PublisherFactory = lambda: publisher(nc)  # noqa: E731
        yield Deps(db=client[mongodb_db], ops=ops, publisher=factory,
                   hub=Hub(nc), operator_name=operator_name)
    finally:
        try:
            await nc.drain()
        except Exception:  # closing must not hide why the console stopped
            await nc.close()
        await client.close()
