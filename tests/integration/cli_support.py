"""Running `agents` as an operator does: a subprocess of this checkout against the test servers."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.js import JetStreamContext
from pymongo.asynchronous.database import AsyncDatabase

from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import Workers, worker_env
from tests.factories import plan_tree
from tests.integration.wire import publish_all, wait_for_count

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Agents:
    env: dict[str, str]

    async def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli.main", *args, cwd=ROOT, env={**self.env, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str) -> Result:
        r = await self(*args)
        assert r.code == 0, f"agents {' '.join(args)} exited {r.code}: {r.err}{r.out}"
        return r


def assert_one_line_error(r: Result, code: int, *fragments: str) -> None:
    """A user mistake: the exit code, one line on stderr naming it, no traceback."""
    assert r.code == code, (r.code, r.out, r.err)
    assert "Traceback" not in r.err, r.err
    line = " ".join(r.err.split())
    for f in fragments:
        assert f in line, (f, r.err)


@pytest.fixture
def agents(nats_server: ManagedServer, mongo_uri: str, db_name: str) -> Agents:
    env = {**os.environ, "NATS_URL": nats_server.url, "MONGODB_URI": mongo_uri,
           "MONGODB_DB": db_name, "USER": "tester", "COLUMNS": "200",
           "PYTHONPATH": str(ROOT)}
    return Agents(env)


@pytest.fixture
async def cli_workers(nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
                      db_name: str, tmp_path: Path) -> AsyncIterator[Workers]:
    """The workers, with the revert archive under tmp_path instead of the user's data dir."""
    env = worker_env(nats_server.url, mongo_uri, db_name,
                     ARCHIVE_ROOT=str(tmp_path / "archive"), CORRECTIONS_RETRY_DELAY="0.2")
    w = Workers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        yield w
    finally:
        w.stop()


async def seed_plan(js: JetStreamContext, db: AsyncDatabase[Document], size: int = 12,
                    seed: int = 3) -> list[dict[str, Any]]:
    """A plan published as an agent would, returned once every decision is recorded."""
    tree = plan_tree(size, seed=seed)
    await publish_all(js, tree)
    plan_id = tree[0]["plan_id"]
    assert await wait_for_count(db, "decisions", size, timeout=30,
                                query={"plan_id": plan_id}) == size
    return tree
