"""One store contract, two backends: every test here runs against the in-memory store
(tests/memory_store.py) and against the real MongoDB-compatible server (the
`MongoStore` the bootstrap opens).

The fixture yields a `Backend`: the store the services would be handed (it offers every
port of services/ports.py), the read port the console and the CLI read through
(services/read_ports.py), and a loader for scenes. A rule the memory store keeps
differently from the real one fails here, which is what lets the service tests trust it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo.asynchronous.client_session import AsyncClientSession

from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.model import Decision
from contracts.invariants.approvals import DEFAULT_TTL
from contracts.invariants.holds import Hold
from contracts.shared.ids import new_id
from services.ports.corrections import CorrectionStorePort
from services.ports.invariants import InvariantStorePort
from services.ports.records import RecordedDecisions
from services.read_ports import LedgerReads
from store.approvals import open_approvals
from store.database import PLAN_LOCKS
from store.mongo_store import MongoStore
from store.transactions import run_in_transaction
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.memory_store import MemoryStore

LEASE_SECONDS = 5.0
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass
class Backend:
    name: str
    store: CorrectionStorePort
    invariant_store: InvariantStorePort
    recorded: RecordedDecisions
    reads: LedgerReads
    raw: Any
    """The concrete store, for the reads beyond the ports (in_sequence, holder, count)."""
    load: Callable[[Sequence[Decision]], Awaitable[list[Decision]]]
    expire_lease: Callable[[str], Awaitable[None]]
    """Make a plan's lease run out now, as its holder's silence would after the TTL: the
    lease's clock is the store's own, which a test cannot move."""
    open_approvals: Callable[[Sequence[Hold], datetime], Awaitable[None]]
    """Open an approval for each hold awaiting one, as the recorder's transaction does
    (store.approvals.open_approvals; the in-memory store keeps it the same way)."""


@pytest.fixture(params=[pytest.param("memory", marks=pytest.mark.unit),
                        pytest.param("mongo", marks=pytest.mark.store)])
def b(request: pytest.FixtureRequest) -> Backend:
    """The backend under test (short: every test of the suite takes it)."""
    if request.param == "memory":
        m = MemoryStore(lease_seconds=LEASE_SECONDS)

        async def expire_in_memory(plan_id: str) -> None:
            owner, _ = m.db.state.leases[plan_id]
            m.db.state.leases[plan_id] = (owner, LONG_AGO)

        async def open_in_memory(holds: Sequence[Hold], now: datetime) -> None:
            await m.approvals.open(list(holds), now, DEFAULT_TTL)

        return Backend("memory", m, m, m.decisions, m, m, m.load_plan, expire_in_memory,
                       open_in_memory)
    # Only the mongo half starts a server (and imports the driver).

    db = request.getfixturevalue("db")
    ms = MongoStore(db, lease_seconds=LEASE_SECONDS)

    async def load(decisions: Sequence[Decision]) -> list[Decision]:
        return await load_plan(db, decisions)

    async def expire_in_mongo(plan_id: str) -> None:
        await db[PLAN_LOCKS].update_one({"_id": plan_id}, {"$set": {"expires_at": LONG_AGO}})

    async def open_in_mongo(holds: Sequence[Hold], now: datetime) -> None:
        async def write(session: AsyncClientSession) -> None:
            await open_approvals(db, holds, now, DEFAULT_TTL, session)
        await run_in_transaction(db.client, write)

    return Backend("mongo", ms, ms, ms.recorder, ms, ms, load, expire_in_mongo, open_in_mongo)


def d(plan_id: str, parent: str | None, kind: str = "strategy_choice",
      **fields: Any) -> Decision:
    raw = root(plan_id, **fields) if parent is None else decision(plan_id, parent, kind, **fields)
    raw.setdefault("artifacts_produced", [])
    return Decision.model_validate(raw)


async def chain(b: Backend, size: int = 3, plan_id: str | None = None) -> list[Decision]:
    plan = plan_id or new_id()
    out = [d(plan, None)]
    for _ in range(size - 1):
        out.append(d(plan, out[-1].decision_id))
    return await b.load(out)


def request(plan_id: str, decision_id: str, mode: str = "revert") -> CorrectionRequest:
    return CorrectionRequest(plan_id=plan_id, decision_id=decision_id,
                             mode=CorrectionMode(mode), guidance="Use a token bucket instead.",
                             requested_by="alice")
