"""The README's and docs/cli.md's commands, run as written against `agents up`.

After the documented setup (`agents up` in one terminal, with port flags so it runs
beside other tests; in the others its export line and `. .venv/bin/activate`), every
`$ ` line of the README's and docs/cli.md's text blocks and every `.venv/bin/agents` line
of the README's bash blocks runs in a shell, in page order. The example IDs of the pages
stand for the IDs this run makes (the agent's plan, the revert's correction, ...), read
from the outputs that print them. Each command must exit as the page says (an `error:`
line shown means exit 1, else 0) and print the first line the page shows, up to IDs,
numbers and times. A page whose commands drift from the CLI fails here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest

from contracts.shared.ids import new_id
from deploy.embedded import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

ULID = r"[0-9A-Z]{26}"
BIN = ROOT / ".venv" / "bin"


@dataclass
class Command:
    line: str
    shown: str | None
    """The first output line the page shows, if any."""
    page: str


def commands(page: Path) -> list[Command]:
    """`$ ` lines of text blocks (with `\\` continuations), `.venv/bin/agents` lines of
    bash blocks, in order, each with the first output line shown after it."""
    found: list[Command] = []
    block: str | None = None
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip()
            continue
        text = line.strip()
        if block == "text" and text.startswith("$ "):
            command = text[2:]
            while command.endswith("\\") and i < len(lines):
                command = command[:-1] + " " + lines[i].strip()
                i += 1
            shown = lines[i] if i < len(lines) and not lines[i].startswith(("$", "```")) \
                else None
            found.append(Command(command, shown, page.name))
        elif block == "bash" and text.startswith(".venv/bin/agents"):
            found.append(Command(text.split("  #")[0].strip(), None, page.name))
    return found


def shape(line: str) -> str:
    """A line with what differs between runs blanked: IDs, times, numbers, spacing."""
    line = re.sub(ULID, "<id>", line)
    line = re.sub(r"…[0-9A-Z]{8}", "<id>", line)
    line = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?", "<t>", line)
    line = re.sub(r"\d+", "<n>", line)
    return " ".join(line.split())


@dataclass
class Stack:
    env: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)
    """Each page's example ID -> the ID of this run."""

    def real(self, text: str) -> str:
        for example in sorted(self.ids, key=len, reverse=True):
            text = text.replace(example, self.ids[example])
        return text

    async def run(self, command: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=ROOT, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()


async def start_up(tmp: Path) -> tuple[asyncio.subprocess.Process, dict[str, str]]:
    """`agents up` with its own ports; the env of another terminal once set up."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NATS_URL", "MONGODB_URI", "MONGODB_DB", "ARTIFACTS_ROOT")}
    ports = [str(free_port()) for _ in range(4)]
    up = await asyncio.create_subprocess_exec(
        str(BIN / "agents"), "up", "--data-dir", str(tmp / "data"), "--nats-port", ports[0],
        "--mongo-port", ports[1], "--health-port", ports[2], "--console-port", ports[3],
        cwd=tmp, env={**env, "COLUMNS": "200"}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    assert up.stdout is not None
    exports: dict[str, str] = {}
    seen = []
    async with asyncio.timeout(120):
        while "workers running" not in " ".join(seen[-3:]):
            line = (await up.stdout.readline()).decode()
            assert line, "agents up ended: " + "".join(seen)
            seen.append(line)
            if line.startswith("export "):
                exports = dict(re.findall(r"(\w+)='?([^' ]+)'?", line[7:]))
    asyncio.get_running_loop().create_task(_drain(up))
    assert set(exports) == {"NATS_URL", "MONGODB_URI"}, seen
    # `. .venv/bin/activate`: the venv's bin first on the PATH.
    shell = {**env, **exports, "PATH": f"{BIN}:{env.get('PATH', '')}",
             "VIRTUAL_ENV": str(ROOT / ".venv"), "USER": "alice", "COLUMNS": "200"}
    return up, shell


async def _drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdout is not None
    while await proc.stdout.readline():
        pass


async def before(stack: Stack, command: str, done: set[str]) -> None:
    """What an agent does between the pages' commands: a violation reported, a body
    that is not JSON published (each once, where the page says it happened)."""
    if "invariant violations" in command and "violation" not in done:
        done.add("violation")
        plan, invariant = stack.ids["01M8SXQREQSFB0CE4ZHM2PST0B"], stack.ids[
            "01M8SY3M4N5P6Q7R8S9T0V1W2X"]
        vid = new_id()
        nc = await nats.connect(stack.env["NATS_URL"])
        await nc.jetstream().publish(f"invariants.violations.{plan}", json.dumps({
            "violation_id": vid, "invariant_id": invariant, "plan_id": plan,
            "severity": "error", "details": "deleted a production row"}).encode(),
            headers={"Nats-Msg-Id": vid})
        await nc.close()
        stack.ids["01M8SY0A1B2C3D4E5F6G7H8J9K"] = vid
        await until(stack, f"agents invariant violations --plan {plan} --json", vid)
    if "dead-letters" in command and "letter" not in done:
        done.add("letter")
        plan = stack.ids["01M8SXQREQSFB0CE4ZHM2PST0B"]
        nc = await nats.connect(stack.env["NATS_URL"])
        await nc.jetstream().publish(f"decisions.recorded.{plan}", b"not json",
                                     headers={"Nats-Msg-Id": new_id()})
        await nc.close()
        out = await until(stack, "agents dead-letters list --json", "DECISIONS:")
        stack.ids["DECISIONS:17"] = json.loads(out)[0]["id"]


async def until(stack: Stack, command: str, wanted: str) -> str:
    for _ in range(60):
        code, out, _ = await stack.run(command)
        if code == 0 and wanted in out:
            return out
        await asyncio.sleep(0.5)
    raise AssertionError(f"{command}: {wanted} never showed")


def learn(stack: Stack, command: str, out: str) -> None:
    """The IDs a command printed that later commands of the pages name."""
    if "examples/agent_records_plan.py" in command:
        plan = re.search(rf"^plan_id ({ULID})  \(child plan ({ULID})\)", out, re.M)
        kinds = dict(re.findall(rf"^  (\w+) +({ULID})  seq", out, re.M))
        assert plan and kinds, out
        stack.ids |= {"01M8SXQREQSFB0CE4ZHM2PST0B": plan[1],
                      "01M8SXQRF1SESCT5B101XYSNGS": plan[2],
                      "01M8SXQREWV5WM527P0BCSM9WD": kinds["strategy_choice"],
                      "01M8SXQREXEG6M1EH67ARNVRGG": kinds["implementation_choice"]}
    elif "--guidance \"Use an in-process token bucket\"" in command:
        c = re.search(rf"correction ({ULID}) requested", out)
        new = re.search(rf"applied new decision ({ULID})", out)
        assert c and new, out
        stack.ids |= {"01M8SXR8P564EX5FTBS76CB067": c[1],
                      "01M8SXR8YCVY2XTJME24ZNYNGC": new[1], "ME24ZNYNGC": new[1][-10:]}
    elif "invariant add no-prod-deletes" in command:
        inv = re.search(rf"invariant ({ULID}) added", out)
        assert inv, out
        stack.ids["01M8SY3M4N5P6Q7R8S9T0V1W2X"] = inv[1]


@pytest.mark.walkthrough
async def test_the_readme_and_the_cli_page_run_as_written(tmp_path: Path) -> None:
    up, env = await start_up(tmp_path)
    stack = Stack(env)
    subscriber: asyncio.subprocess.Process | None = None
    done: set[str] = set()
    try:
        for c in [*commands(ROOT / "README.md"), *commands(ROOT / "docs" / "cli.md")]:
            if "subscriber_prints_outcomes.py" in c.line:  # terminal 2: it runs on
                subscriber = await asyncio.create_subprocess_exec(
                    "bash", "-c", c.line, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
                assert subscriber.stdout is not None
                first = (await asyncio.wait_for(subscriber.stdout.readline(), 60)).decode()
                assert c.shown is not None and shape(first) == shape(c.shown), first
                continue
            await before(stack, c.line, done)
            command = stack.real(c.line)
            code, out, err = await stack.run(command)
            learn(stack, c.line, out)
            refused = c.shown is not None and c.shown.startswith("error:")
            where = f"{c.page}: {command}\n{out}{err}"
            assert code == (1 if refused else 0), where
            assert "Traceback" not in err, where
            if c.shown is not None and not c.shown.startswith("..."):
                got = (err if refused else out).splitlines()[0]
                assert shape(got) == shape(stack.real(c.shown)), where
        # Terminal 2 saw the revert's outcome.
        assert subscriber is not None and subscriber.stdout is not None
        applied = (await asyncio.wait_for(subscriber.stdout.readline(), 60)).decode()
        assert applied.startswith("APPLIED revert " + stack.ids[
            "01M8SXR8P564EX5FTBS76CB067"]), applied
    finally:
        for proc in (subscriber, up):
            if proc is not None and proc.returncode is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    os.killpg(proc.pid, signal.SIGKILL)


def test_the_pages_hold_commands_and_no_bare_agents_outside_the_setup() -> None:
    """Every command the pages show runs (above), and the README never asks for a bare
    `agents` before saying how to put it on the PATH."""
    readme, cli = commands(ROOT / "README.md"), commands(ROOT / "docs" / "cli.md")
    assert len(readme) >= 9 and len(cli) >= 30
    text = (ROOT / "README.md").read_text()
    assert text.index(". .venv/bin/activate") < text.index("$ .venv/bin/python")
