"""The console's dependencies over a store the test holds: the MongoDB store of the
test's database, or the in-memory store (tests/memory_store.py), with the test's NATS
connection for the operator client, the live hub and the publisher.

The console's own wiring opens the ledger from settings (console.wiring); this builds
the same `Deps` over the store a test already set a scene in.
"""

from __future__ import annotations

from nats.aio.client import Client

from bootstrap.publisher import JetStreamPublisher
from clients.operator import CorrectionClient
from console.deps import Deps
from console.live import Hub
from services.bulk import BulkService
from services.dead_letters import DeadLetterService
from services.invariants import InvariantService
from store.mongo_store import MongoStore
from tests.memory_store import MemoryStore

OPERATOR = "tester"


def deps_over(store: MongoStore | MemoryStore, nc: Client) -> Deps:
    publisher = JetStreamPublisher(nc, ack_timeout=5.0)
    bulk = BulkService(store, store.bulk, bound=1000, scan_max=2000, max_decisions=10_000) \
        if isinstance(store, MongoStore) else None
    return Deps(reads=store, invariants=InvariantService.from_store(store, publisher),
                dead_letters=DeadLetterService(store.dead_letters, publisher, store),
                ops=CorrectionClient(nc, requested_by=OPERATOR), hub=Hub(nc),
                operator_name=OPERATOR, bulk=bulk)
