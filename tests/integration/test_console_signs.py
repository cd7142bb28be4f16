"""The console acts as a named operator principal: with CONSOLE_NKEY_SEED its writes are
signed with its own key (console.wiring), so a revert it asks for records the console's
principal as the verified requester where the principals file lists that key, and is
recorded unverified (the name it sends kept as a claim) where there is no principals
file to verify it against; a violation it resolves names it the same way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from bootstrap.settings import Settings
from console.app import run_console
from console.config import ConsoleConfig
from console.wiring import open_deps
from contracts.invariants import subjects as isubjects
from contracts.invariants.families import VIOLATIONS
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from deploy.embedded import ManagedServer, free_port
from services.invariants import InvariantService
from store.database import Document
from store.invariant_store import InvariantStore
from tests.conftest import worker_env
from tests.in_process_workers import InProcessWorkers
from tests.integration.audit_support import AGENT, WORKER, ended, record_plan
from tests.integration.wire import until
from tests.trust_support import member, write_principals, write_seed

pytestmark = pytest.mark.e2e

CONSOLE = member("console-ops", Role.OPERATOR, "*")


@asynccontextmanager
async def console_as(name: str, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
                     ) -> AsyncIterator[str]:
    """The console over its own wiring (console.wiring.open_deps), as `agents console`
    runs it with `environ`; its URL."""
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env()
    config = ConsoleConfig(port=free_port())
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_console(config, lambda: open_deps(settings, name),
                                           stop, ready.set))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    try:
        yield config.url.rstrip("/")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.mark.parametrize("listed", [True, False])
async def test_the_console_signs_its_writes_as_its_own_principal(
        listed: bool, nats_server: ManagedServer, mongo_uri: str, db_name: str,
        db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    principals = write_principals(tmp_path / "principals.toml", AGENT, CONSOLE, WORKER)
    verifying = {"LEDGER_PRINCIPALS": str(principals)} if listed else {}
    environ = worker_env(nats_server.url, mongo_uri, db_name, **verifying,
                         ARCHIVE_ROOT=str(tmp_path / "archive"))
    seed = str(write_seed(tmp_path / "w.seed", WORKER))
    w = InProcessWorkers({**environ, "NATS_NKEY_SEED": seed}, tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        plan, ids = await record_plan(nc, db)
        vid = await _violation(nc, db, plan)
        seed = write_seed(tmp_path / "console.seed", CONSOLE)
        async with console_as(CONSOLE.name, {**environ, "CONSOLE_NKEY_SEED": str(seed)},
                              monkeypatch) as url, \
                httpx.AsyncClient(base_url=url, timeout=60) as http:
            asked = await http.post(f"/api/decisions/{ids['b']}/corrections",
                                    json={"mode": "revert"})
            assert asked.status_code == 202, asked.text
            cid = asked.json()["correction_id"]
            done = await ended(db, cid)
            resolved = await http.post(f"/api/violations/{vid}/resolve", json={})
            assert resolved.status_code == 200, resolved.text
            said = await http.post(f"/api/decisions/{ids['a']}/comments",
                                   json={"text": "Checked with billing"})
            assert said.status_code == 202, said.text
            comment = await until(lambda: db.comments.find_one(
                {"_id": said.json()["comment_id"]}))
    finally:
        await w.stop()
    assert done["status"] == "applied", done.get("error")
    assert done["claimed_by"] == CONSOLE.name
    violation = await db.invariant_violations.find_one({"_id": vid})
    assert violation is not None
    if listed:
        assert done["requested_by"] == CONSOLE.name and done["verified"] is True
        assert done["signature"]["key"] == CONSOLE.public
        assert violation["resolved_by"] == CONSOLE.name
        assert violation["resolution_signature"]["key"] == CONSOLE.public
        assert comment["author"] == CONSOLE.name and comment["verified"] is True
    else:
        assert done["requested_by"] is None and done["verified"] is False
        assert done["signature"] is None
        assert violation["resolved_by"] is None and violation["resolved_at"] is not None
        assert comment["author"] == "unverified" and comment["verified"] is False


async def _violation(nc: nats.NATS, db: AsyncDatabase[Document], plan: str) -> str:
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    inv = (await svc.add_invariant(f"inv-{new_id()[-6:]}", "Mind the quota")).id
    vid = new_id()
    body = {"violation_id": vid, "invariant_id": inv, "plan_id": plan,
            "severity": "warning", "details": "over quota"}
    data, h = AGENT.signed(VIOLATIONS.name, isubjects.violations(plan), vid, body)
    await nc.jetstream().publish(isubjects.violations(plan), data, headers=h)
    await until(lambda: db.invariant_violations.find_one({"_id": vid}))
    return vid
