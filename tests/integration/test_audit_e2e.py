"""Tamper-evident history against real servers: a plan with every kind of chained
record verifies, each way of tampering with it in MongoDB is named by `agents audit
verify` (exit 6), two writers of one plan at once leave a valid chain, and an export
verifies offline with the standalone script (examples/verify_audit.py), and fails it
once tampered with."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from contracts.shared.ids import new_id
from contracts.trust.audit import verify_export
from contracts.trust.audit_findings import Report
from contracts.trust.audit_lines import header
from deploy.embedded import ManagedServer
from store.audit import READ_TRIES, AuditReader, PlanKeptChanging
from store.database import Document
from tests.factories import decision
from tests.integration.audit_support import (
    AGENT,
    ALICE,
    Scene,
    build_scene,
    ended,
    publish_signed,
    record_plan,
    start_workers,
    verifier_command,
)
from tests.integration.cli_support import Agents, agents
from tests.integration.wire import until

__all__ = ["agents"]

pytestmark = pytest.mark.e2e

BROKEN = 6


@pytest.fixture
async def scene(nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
                db_name: str, tmp_path: Path, nc: nats.NATS
                ) -> AsyncIterator[tuple[Scene, Path]]:
    w, principals = await start_workers(nats_server, mongo_uri, db_name, tmp_path)
    try:
        yield await build_scene(nc, db, w), principals
    finally:
        await w.stop()


async def verify(agents: Agents, plan: str, principals: Path) -> tuple[int, dict[str, Any]]:
    r = await agents("audit", "verify", plan, "--principals", str(principals), "--json")
    assert "Traceback" not in r.err, r.err
    return r.code, r.json


async def test_a_plan_with_every_kind_of_record_verifies(
        scene: tuple[Scene, Path], agents: Agents, db: AsyncDatabase[Document]) -> None:
    s, principals = scene
    code, report = await verify(agents, s.plan, principals)
    assert code == 0, report
    assert report["ok"] and report["keys_checked"]
    kinds: dict[str, int] = {}
    for line in await _lines(agents, s.plan, principals):
        kinds[line["kind"]] = kinds.get(line["kind"], 0) + 1
    # 5 recorded, the revert's replacement, the append's intervention; two requests and
    # ends of the applied corrections, the cancelled one's request and end; a report and
    # its resolution.
    assert kinds == {"decision": 7, "correction.request": 3, "correction.end": 3,
                     "violation.report": 1, "violation.resolution": 1}
    # Signed: the agent's 5 decisions and report, alice's 3 requests, her cancel and her
    # resolution; the ledger's own: 2 decisions, 2 ends.
    assert report["signed"] == 11 and report["ledger"] == 4 and report["unsigned"] == []
    # The child plan: its root, which the append wrote (and the reconciler's
    # invariant_enforced decision, signed by the workers' key, if it came already).
    code, child = await verify(agents, s.child_plan, principals)
    assert code == 0 and child["ledger"] == 1 and child["unsigned"] == [], child
    plan = await db.plans.find_one({"_id": s.plan})
    assert plan is not None and plan["chain_length"] == 15


async def _lines(agents: Agents, *args: str) -> list[dict[str, Any]]:
    plan, principals = args
    r = await agents("audit", "export", plan, "--principals", str(principals))
    assert r.code == 0, r.err
    return [json.loads(x) for x in r.out.splitlines()[1:]]


Tamper = Callable[[AsyncDatabase[Document], Scene], Awaitable[None]]


async def _changed(db: AsyncDatabase[Document], s: Scene) -> None:
    await db.decisions.update_one({"_id": s.decisions["a"]},
                                  {"$set": {"chosen_option": "Something else"}})


async def _deleted(db: AsyncDatabase[Document], s: Scene) -> None:
    await db.decisions.delete_one({"_id": s.decisions["c"]})


async def _swapped(db: AsyncDatabase[Document], s: Scene) -> None:
    a = await db.decisions.find_one({"_id": s.decisions["a"]})
    b = await db.decisions.find_one({"_id": s.decisions["b"]})
    for this, that in ((a, b), (b, a)):
        assert this is not None and that is not None
        await db.decisions.update_one({"_id": this["_id"]},
                                      {"$set": {"chain.seq": that["chain"]["seq"]}})


async def _flipped(db: AsyncDatabase[Document], s: Scene) -> None:
    doc = await db.decisions.find_one({"_id": s.decisions["a"]})
    assert doc is not None
    sig = doc["signature"]["sig"]
    flipped = sig[:10] + ("A" if sig[10] != "A" else "B") + sig[11:]
    await db.decisions.update_one({"_id": s.decisions["a"]},
                                  {"$set": {"signature.sig": flipped}})


async def _superseded(db: AsyncDatabase[Document], s: Scene) -> None:
    await db.decisions.update_one({"_id": s.decisions["a"]},
                                  {"$set": {"superseded_by": s.decisions["d"]}})


@pytest.mark.parametrize(("tamper", "rule", "who"), [
    (_changed, "changed", "a"), (_deleted, "removed", None), (_swapped, "reordered", None),
    (_flipped, "bad_signature", "a"), (_superseded, "unexplained", "a")])
async def test_each_tampering_is_named(scene: tuple[Scene, Path], agents: Agents,
                                       db: AsyncDatabase[Document], tamper: Tamper,
                                       rule: str, who: str | None) -> None:
    s, principals = scene
    await tamper(db, s)
    code, report = await verify(agents, s.plan, principals)
    assert code == BROKEN, report
    first = report["findings"][0]
    assert first["rule"] == rule, report["findings"]
    assert rule in report["first_broken"]
    if who is not None:
        assert first["record_id"] == s.decisions[who]


async def test_two_writers_at_once_leave_a_valid_chain(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path, nc: nats.NATS, agents: Agents) -> None:
    w, principals = await start_workers(nats_server, mongo_uri, db_name, tmp_path)
    try:
        plan, ids = await record_plan(nc, db)
        more = [decision(plan, ids["d"], question=f"more {i}?") for i in range(150)]
        ops = CorrectionClient(nc, signer=ALICE.signer)
        # The agent records into the plan while the operator reverts a branch of it.
        _, revert = await asyncio.gather(publish_signed(nc.jetstream(), AGENT, more),
                                         ops.request(plan, ids["a"], "revert", "Simpler"))
        assert (await ended(db, revert))["status"] == "applied"
        await until(lambda: _stored(db, plan, 5 + 150 + 1), timeout=90)
    finally:
        await w.stop()
    code, report = await verify(agents, plan, principals)
    assert code == 0, report
    assert report["records"] == 5 + 150 + 1 + 2


async def test_a_plan_read_while_it_is_written_verifies_every_time(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path, nc: nats.NATS) -> None:
    """An audit of a plan an agent is still recording into reads it as of one moment:
    a decision committed between its reads is never taken for a removed or reordered
    record."""
    w, _ = await start_workers(nats_server, mongo_uri, db_name, tmp_path)
    try:
        plan, ids = await record_plan(nc, db)
        more = [decision(plan, ids["d"], question=f"more {i}?") for i in range(120)]

        async def agent() -> None:
            for i in range(0, len(more), 4):
                await publish_signed(nc.jetstream(), AGENT, more[i:i + 4])
                await asyncio.sleep(0.02)

        recording = asyncio.create_task(agent())
        reader, reports = AuditReader(db), list[Report]()
        while not recording.done() or len(reports) < 5:
            entries, lines = await reader.export([plan])
            reports.append(verify_export(header(exported_at="", parameters={},
                                                principals=[], plans=entries), lines))
        await recording
    finally:
        await w.stop()
    broken = [str(r.findings[0]) for r in reports if not r.ok]
    assert broken == [], f"{len(broken)} of {len(reports)} reads: {broken[:3]}"


class AlwaysWritten(AuditReader):
    """A plan whose counter moves between every two reads of it."""

    reads = 0

    async def _counter(self, plan_id: str) -> Document | None:
        self.reads += 1
        return {"_id": plan_id, "chain_length": self.reads}


async def test_a_plan_written_during_every_read_is_given_up_on_in_a_bounded_time(
        db: AsyncDatabase[Document]) -> None:
    reader = AlwaysWritten(db)
    with pytest.raises(PlanKeptChanging, match=r"during each of \d+ reads of it; audit it "
                                               "again"):
        await reader.plan(new_id())
    assert reader.reads == READ_TRIES + 1


async def _stored(db: AsyncDatabase[Document], plan: str, n: int) -> bool:
    return await db.decisions.count_documents({"plan_id": plan}) >= n


async def test_an_export_verifies_offline_and_fails_once_tampered_with(
        scene: tuple[Scene, Path], agents: Agents, db: AsyncDatabase[Document],
        tmp_path: Path) -> None:
    s, principals = scene
    export = tmp_path / "audit.jsonl"
    r = await agents("audit", "export", s.plan, s.child_plan, "--principals",
                     str(principals), "--output", str(export))
    assert r.code == 0, r.err
    head = json.loads(export.read_text().splitlines()[0])
    assert {p["name"] for p in head["principals"]} == {"billing-agent", "alice",
                                                       "ledger-worker"}
    assert set(head["plans"]) == {s.plan, s.child_plan}
    ok = subprocess.run(verifier_command(export), check=False, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "chain intact" in ok.stdout

    await _changed(db, s)
    r = await agents("audit", "export", s.plan, "--principals", str(principals),
                     "--output", str(export))
    assert r.code == 0, r.err
    bad = subprocess.run(verifier_command(export), check=False, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert f"changed: plan {s.plan}" in bad.stdout and s.decisions["a"] in bad.stdout


async def test_an_export_since_a_time_starts_each_plan_there(
        scene: tuple[Scene, Path], agents: Agents, db: AsyncDatabase[Document],
        tmp_path: Path) -> None:
    s, principals = scene
    revert = await db.corrections.find_one({"_id": s.revert})
    assert revert is not None
    cut = revert["history"][0]["at"].isoformat()  # the revert's request, and on
    export = tmp_path / "since.jsonl"
    r = await agents("audit", "export", "--since", cut, "--principals", str(principals),
                     "-o", str(export))
    assert r.code == 0, r.err
    head, *lines = [json.loads(x) for x in export.read_text().splitlines()]
    assert head["parameters"]["since"] is not None
    assert set(head["plans"]) == {s.plan, s.child_plan}
    start = head["plans"][s.plan]["from_seq"]
    assert start > 0 and lines[0]["chain"]["seq"] == start
    assert lines[0]["kind"] == "correction.request" and lines[0]["record_id"] == s.revert
    ok = subprocess.run(verifier_command(export), check=False, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
