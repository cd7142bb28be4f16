"""Running `agents` against the test servers: in this process through Typer's runner (what
almost every CLI test does: no interpreter start per command), or as a subprocess of this
checkout, as an operator runs it (`Agents(env, subprocess=True)`, for the smoke tests of
exit codes and output streams)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.js import JetStreamContext
from pymongo.asynchronous.database import AsyncDatabase
from typer.testing import CliRunner

from cli import banner, errors, render
from cli.main import app
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import worker_env
from tests.factories import plan_tree
from tests.in_process_workers import InProcessWorkers
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


def _invoke(args: tuple[str, ...], env: dict[str, str]) -> Result:
    """One `agents` command in this process. It runs in a thread of its own (the test's
    event loop is busy awaiting it), where the command's own `asyncio.run` gets a loop."""
    # The CLI's Rich terminals fix their width when first imported (from COLUMNS if set
    # then, as pytest-xdist workers do); a command run as a process of its own reads this env.
    width = int(env.get("COLUMNS", "200"))
    for terminal in (render.out, errors.err, banner.terminal):
        terminal.width = width
    # The runner's stdout is a pipe; TEST_TERMINAL=1 makes the CLI write as to a terminal
    # (colours stripped by the capture), to test what a person sees.
    render.out._force_terminal = True if env.get("TEST_TERMINAL") == "1" else None
    try:
        result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    finally:
        render.out._force_terminal = None
    return Result(result.exit_code, result.stdout, result.stderr)


_IN_PROCESS = threading.Lock()
"""One in-process command at a time: the runner swaps sys.stdout and os.environ."""


@dataclass
class Agents:
    env: dict[str, str]
    subprocess: bool = False

    async def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        return await self._run(args, env, self.subprocess)

    async def concurrently(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """A command other commands run beside (a `--wait` while the test cancels, say): a
        subprocess, since in-process commands share sys.stdout and run one at a time."""
        return await self._run(args, env, True)

    async def _run(self, args: tuple[str, ...], env: dict[str, str] | None,
                   subprocess: bool) -> Result:
        if not subprocess:
            def run() -> Result:
                with _IN_PROCESS:
                    return _invoke(args, {**self.env, **(env or {})})
            return await asyncio.wait_for(asyncio.to_thread(run), 60)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli.main", *args, cwd=ROOT, env={**self.env, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, env: dict[str, str] | None = None) -> Result:
        r = await self(*args, env=env)
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
                      db_name: str, tmp_path: Path) -> AsyncIterator[InProcessWorkers]:
    """The workers (in this process: tests/in_process_workers.py), with the revert
    archive under tmp_path instead of the user's data dir."""
    env = worker_env(nats_server.url, mongo_uri, db_name,
                     ARCHIVE_ROOT=str(tmp_path / "archive"), CORRECTIONS_RETRY_DELAY="0.2")
    w = InProcessWorkers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        yield w
    finally:
        await w.stop()


async def seed_plan(js: JetStreamContext, db: AsyncDatabase[Document], size: int = 12,
                    seed: int = 3) -> list[dict[str, Any]]:
    """A plan published as an agent would, returned once every decision is recorded."""
    tree = plan_tree(size, seed=seed)
    await publish_all(js, tree)
    plan_id = tree[0]["plan_id"]
    assert await wait_for_count(db, "decisions", size, timeout=30,
                                query={"plan_id": plan_id}) == size
    return tree
