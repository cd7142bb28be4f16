"""The three examples, run as a new user would (docs/clients.md): the subscriber in the
background, then the agent, then the operator with the plan ID the agent printed."""

from __future__ import annotations

import asyncio
import re
import sys
from asyncio.subprocess import PIPE, STDOUT, Process

import pytest

from deploy.embedded import ManagedServer
from tests.conftest import ROOT, worker_env
from tests.in_process_workers import InProcessWorkers

pytestmark = pytest.mark.e2e

ULID = r"[0-9A-HJKMNP-TV-Z]{26}"


async def start(script: str, *args: str, env: dict[str, str]) -> Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / script), *args, cwd=ROOT, env=env,
        stdout=PIPE, stderr=STDOUT)


async def run(script: str, *args: str, env: dict[str, str],
              timeout: float = 60.0) -> tuple[int, str]:
    proc = await start(script, *args, env=env)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_the_three_examples_walk_through(workers: InProcessWorkers,
                                               nats_server: ManagedServer,
                                               mongo_uri: str, db_name: str) -> None:
    env = worker_env(nats_server.url, mongo_uri, db_name)
    subscriber = await start("subscriber_prints_outcomes.py", "--count", "1", env=env)
    try:
        assert subscriber.stdout is not None
        first = await asyncio.wait_for(subscriber.stdout.readline(), 30)
        assert first.startswith(b"listening"), first

        code, agent_out = await run("agent_records_plan.py", env=env)
        assert code == 0, agent_out
        plan_id = re.search(rf"^plan_id ({ULID})", agent_out, re.M)
        strategy = re.search(rf"^  strategy_choice +({ULID})", agent_out, re.M)
        assert plan_id and strategy, agent_out
        assert len(re.findall(rf"^  \w+ +{ULID}  seq", agent_out, re.M)) == 9

        # As the walkthrough says: only the plan ID; the example finds the strategy.
        code, operator_out = await run("operator_reverts.py", plan_id[1], env=env)
        assert code == 0, operator_out
        assert f"dry run: revert {strategy[1]}" in operator_out
        assert "child plans rolled back: " in operator_out
        assert re.search(r"^  applied$", operator_out, re.M), operator_out
        correction = re.search(rf"requested correction ({ULID})", operator_out)
        assert correction, operator_out

        out, _ = await asyncio.wait_for(subscriber.communicate(), 30)
        assert subscriber.returncode == 0, out
        assert f"APPLIED revert {correction[1]} plan {plan_id[1]}" in out.decode()
    finally:
        if subscriber.returncode is None:
            subscriber.kill()
            await subscriber.wait()
