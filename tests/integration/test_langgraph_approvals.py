"""The LangGraph approvals example end to end against the real servers and workers: an
invariant added from the CLI holds the agent's prod writes, the graph pauses at its gate
(`interrupt()`), the first is approved from the CLI and written, the second denied with
guidance and the graph follows it instead."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, worker_env
from tests.integration.cli_support import Agents, agents, cli_workers

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e

CHECK = '!(tool.name == "write_file" && tool.arguments.path.startsWith("deploy/prod/"))'


async def _until(stream: asyncio.StreamReader, lines: list[str], pattern: str) -> re.Match[str]:
    while True:
        line = (await asyncio.wait_for(stream.readline(), 60)).decode()
        assert line, "".join(lines)
        lines.append(line)
        if found := re.search(pattern, line):
            return found


@pytest.mark.usefixtures("cli_workers")
async def test_a_gated_tool_call_approved_and_another_denied_with_guidance(
        agents: Agents, nats_server: object, mongo_uri: str, db_name: str,
        tmp_path: Path) -> None:
    await agents.ok("invariant", "add", "prod-writes", "--description",
                    "Writes under deploy/prod/ need a person's approval", "--check", CHECK,
                    "--needs-approval")
    env = {**worker_env(nats_server.url, mongo_uri, db_name),  # type: ignore[attr-defined]
           "ARTIFACTS_ROOT": str(tmp_path)}
    agent = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / "langgraph_approvals.py"), "--timeout", "60",
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert agent.stdout is not None
    lines: list[str] = []
    try:
        first = await _until(agent.stdout, lines, r"awaiting approval: (\w{26})")
        assert not (tmp_path / "deploy").exists()  # paused at the gate: nothing written
        await agents.ok("approval", "approve", first[1], "--reason", "reviewed")
        await _until(agent.stdout, lines, r"wrote deploy/prod/app\.yaml")
        second = await _until(agent.stdout, lines, r"awaiting approval: (\w{26})")
        await agents.ok("approval", "deny", second[1], "--reason", "not on a Friday",
                        "--guidance", "write it to deploy/staging/ first")
        rest, _ = await asyncio.wait_for(agent.communicate(), 60)
        out = "".join(lines) + rest.decode()
        assert agent.returncode == 0, out
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    assert "guidance: write it to deploy/staging/ first" in out
    assert "done, wrote deploy/prod/app.yaml, deploy/staging/db.yaml" in out
    assert (tmp_path / "deploy" / "prod" / "app.yaml").exists()
    assert (tmp_path / "deploy" / "staging" / "db.yaml").exists()
    assert not (tmp_path / "deploy" / "prod" / "db.yaml").exists()
    shown = (await agents.ok("approval", "list", "--all", "--json")).json
    assert sorted(a["status"] for a in shown) == ["denied", "granted"]
