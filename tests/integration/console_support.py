"""The console served for real (uvicorn on a free port, in the test's event loop) over the
test's MongoDB and NATS, for the API tests (httpx) and the browser tests (Playwright)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from console.app import run_console
from console.config import ConsoleConfig
from console.deps import Deps
from contracts.decisions.model import Decision
from deploy.embedded import free_port
from store.database import Document
from store.mongo_store import MongoStore
from tests.bulk import load_plan
from tests.conftest import Workers
from tests.console_deps import deps_over
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import seed_plan
from tests.integration.recovery_support import env


@dataclass
class Console:
    url: str
    deps: Deps


@asynccontextmanager
async def serve_console(db: AsyncDatabase[Document], nc: nats.NATS,
                        token: str | None = None, *,
                        connect: Callable[[ConsoleConfig], AbstractAsyncContextManager[Deps]]
                        | None = None, **config_fields: Any) -> AsyncIterator[Console]:
    """`connect(config)` opens the Deps (default: over the test's store and connection);
    `config_fields` go to ConsoleConfig (hosts, principal)."""
    config = ConsoleConfig(port=free_port(), token=token, **config_fields)
    opened: list[Deps] = []

    @asynccontextmanager
    async def over_test_store() -> AsyncIterator[Deps]:
        yield deps_over(MongoStore(db), nc)

    @asynccontextmanager
    async def opening() -> AsyncIterator[Deps]:
        async with (connect(config) if connect else over_test_store()) as deps:
            opened.append(deps)
            yield deps

    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.create_task(run_console(config, opening, stop, ready.set))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    try:
        yield Console(config.url.rstrip("/"), opened[0])
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.fixture
async def console(db: AsyncDatabase[Document], nc: nats.NATS) -> AsyncIterator[Console]:
    async with serve_console(db, nc) as c:
        yield c


@dataclass
class Held:
    plan_id: str
    target: str
    correction_id: str


@asynccontextmanager
async def held_executing(nats_url: str, mongo_uri: str, db_name: str,
                         db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path,
                         request: Callable[[str, str], Awaitable[str]] | None = None
                         ) -> AsyncIterator[Held]:
    """A revert stuck in EXECUTING for real, with healthy workers running beside it.

    The driver that took it there is a worker SIGKILLed right after committing EXECUTING
    (CORRECTIONS_CRASH_AT): its attempt is RUNNING and the plan's lease, taken for an
    hour, outlives it, so the workers started next cannot drive it on — exactly the
    correction an operator fails. Inside, the healthy workers are running.

    `request(plan_id, target)` asks for the revert and returns its ID (the browser test
    clicks through the tree); by default the operator client asks."""
    (tmp_path / "artifacts").mkdir(exist_ok=True)
    doomed = Workers(env(nats_url, mongo_uri, db_name, tmp_path,
                         CORRECTIONS_CRASH_AT="after_commit:executing",
                         CORRECTIONS_LEASE_SECONDS="3600"), tmp_path / "doomed.log")
    await doomed.start(nats_url)
    try:
        tree = await seed_plan(nc.jetstream(), db, size=6)
        plan_id, target = tree[0]["plan_id"], tree[1]["decision_id"]
        cid = await (request or (lambda p, t: CorrectionClient(nc).request(p, t, "revert"))
                     )(plan_id, target)
        assert doomed.proc is not None
        code = await asyncio.to_thread(doomed.proc.wait, 60)
        assert code == -9, f"the worker did not die at the step (exit {code})"
        found = await db.corrections.find_one({"_id": cid})
        assert found is not None and found["status"] == "executing", found
    finally:
        doomed.stop()
    survivor = InProcessWorkers(env(nats_url, mongo_uri, db_name, tmp_path),
                                tmp_path / "workers.log")
    await survivor.start(nats_url)
    try:
        yield Held(plan_id, target, cid)
    finally:
        await survivor.stop()


@dataclass
class Wide:
    """root -> A -> C1..Cn (C1 -> K1..K5), root -> B, and B depends on A: reverting A
    affects A, B, every C and every K (n + 7 decisions); root is not affected."""

    decisions: list[Decision]
    root: str
    a: str
    b: str
    cs: list[str]
    ks: list[str]

    @property
    def plan_id(self) -> str:
        return self.decisions[0].plan_id

    @property
    def affected(self) -> set[str]:
        return {self.a, self.b, *self.cs, *self.ks}


async def wide_plan(db: AsyncDatabase[Document], children: int = 130) -> Wide:
    """Loaded straight into MongoDB (tests/bulk.py): a revert of A affects over 100."""
    r = root()
    plan = str(r["plan_id"])
    b = decision(plan, r["decision_id"], "resource_selection", question="Cache?",
                 chosen_option="redis")
    a = decision(plan, r["decision_id"], "strategy_choice", question="Storage?",
                 chosen_option="PostgreSQL 16", downstream_decision_ids=[b["decision_id"]])
    cs = [decision(plan, a["decision_id"], "tool_invocation", question=f"Migrate table {i}?",
                   chosen_option=f"alembic upgrade t{i:03}") for i in range(1, children + 1)]
    ks = [decision(plan, cs[0]["decision_id"], "validation_response", question=f"Check {i}?",
                   chosen_option="passes") for i in range(1, 6)]
    raw = [r, a, b, *cs, *ks]
    for x in raw:
        x.setdefault("artifacts_produced", [])
    loaded = await load_plan(db, [Decision.model_validate(x) for x in raw])
    return Wide(loaded, r["decision_id"], a["decision_id"], b["decision_id"],
                [c["decision_id"] for c in cs], [k["decision_id"] for k in ks])
