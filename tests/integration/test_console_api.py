"""The console's JSON API and live stream against the real servers and workers: reads
agree with the CLI's, writes go over NATS as the CLI's do, and hostile input stays data."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule, RuleViolation
from deploy.embedded import ManagedServer
from store.database import Document
from store.dead_letters import DeadLetterRepository
from tests.factories import decision
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, cli_workers, seed_plan
from tests.integration.console_support import (
    Console,
    console,
    held_executing,
    serve_console,
    wide_plan,
)
from tests.integration.wire import publish_all, until, wait_for_count

__all__ = ["agents", "cli_workers", "console"]

pytestmark = pytest.mark.e2e


async def _sse(url: str, got: list[tuple[str, dict[str, Any]]], ready: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=None) as http, http.stream("GET", url) as r:
        kind = None
        async for line in r.aiter_lines():
            if line.startswith(": connected"):
                ready.set()
            elif line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind:
                got.append((kind, json.loads(line[6:])))


async def test_plans_tree_decision_and_live(cli_workers: InProcessWorkers, agents: Agents,
                                            console: Console, nc: nats.NATS,
                                            db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=12)
    plan_id, root_id = tree[0]["plan_id"], tree[0]["decision_id"]
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        plans = (await http.get("/api/plans")).json()["plans"]
        [p] = [p for p in plans if p["plan_id"] == plan_id]
        assert p["decisions"] == 12 and p["current"] == 12 and p["open_corrections"] == 0

        roots = (await http.get(f"/api/plans/{plan_id}/tree")).json()
        assert [n["decision_id"] for n in roots["nodes"]] == [root_id]
        below = sum(1 for d in tree if d.get("parent_decision_id") == root_id)
        assert roots["nodes"][0]["child_count"] == below
        level = (await http.get(f"/api/plans/{plan_id}/tree",
                                params={"parent": root_id, "limit": 1})).json()
        assert len(level["nodes"]) == 1
        if below > 1:
            assert level["next_after"] is not None
            rest = (await http.get(f"/api/plans/{plan_id}/tree", params={
                "parent": root_id, "after": level["next_after"]})).json()
            assert len(rest["nodes"]) == below - 1

        # The decision panel reads what `agents plan explain --json` reads.
        leaf = tree[-1]["decision_id"]
        shown = (await http.get(f"/api/decisions/{leaf}")).json()
        cli = (await agents.ok("plan", "explain", leaf, "--json")).json
        assert [p["decision_id"] for p in shown["path"]] == [
            p["decision_id"] for p in cli["path"]]
        assert shown["decision"]["chosen_option"] == cli["decision"]["chosen_option"]

        found = (await http.get("/api/find", params={"id": leaf.lower()})).json()
        assert found == {"kind": "decision", "plan_id": plan_id, "decision_id": leaf,
                         "correction_id": None}
        assert (await http.get("/api/find", params={"id": "nope"})).status_code == 404
        assert (await http.get("/api/decisions/not-a-ulid")).status_code == 400

        # Live: a decision recorded through NATS reaches the plan's stream; hostile
        # bytes on the same subjects and another plan's events do not.
        got: list[tuple[str, dict[str, Any]]] = []
        ready = asyncio.Event()
        reader = asyncio.create_task(_sse(f"{console.url}/api/events?plan={plan_id}", got,
                                          ready))
        await asyncio.wait_for(ready.wait(), 10)
        for junk in (b"\xff\xfe", b"[]", b"{}", b'{"plan_id": "<script>"}', b"x" * 70_000):
            await nc.publish(f"decisions.persisted.{plan_id}", junk)
        await seed_plan(nc.jetstream(), db, size=2, seed=9)  # another plan
        extra = decision(plan_id, root_id, "tool_invocation", question="Live?")
        await publish_all(nc.jetstream(), [extra])
        await until(lambda: asyncio.sleep(0, result=any(
            e.get("decision_id") == extra["decision_id"] for _, e in got)), 15)
        reader.cancel()
        assert all(e["plan_id"] == plan_id for _, e in got)
        # A page that goes away is forgotten (its queue with it).
        await until(lambda: asyncio.sleep(0, result=console.deps.hub.listeners == 0), 20)
        assert console.deps.hub.dropped >= 5


async def test_dry_run_correct_cancel_and_csrf(cli_workers: InProcessWorkers, console: Console,
                                               nc: nats.NATS,
                                               db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=8)
    plan_id, target = tree[0]["plan_id"], tree[1]["decision_id"]
    async with httpx.AsyncClient(base_url=console.url, timeout=60) as http:
        report = (await http.post(f"/api/decisions/{target}/dry-run",
                                  json={"mode": "revert"})).json()
        assert report["impact"]["target_decision_id"] == target
        assert target in report["impact"]["affected_decision_ids"]

        # Cross-site and non-JSON writes are refused before anything is read.
        assert (await http.post(f"/api/decisions/{target}/corrections", json={
            "mode": "revert"}, headers={"Origin": "https://evil.example"})).status_code == 403
        assert (await http.post(f"/api/decisions/{target}/corrections",
                                content=b"mode=revert", headers={
                                    "Content-Type": "application/x-www-form-urlencoded"})
                ).status_code == 415
        assert (await http.post(f"/api/decisions/{target}/corrections",
                                json={"mode": "append"})).status_code == 400

        # Held pending (another owner has the plan's lease), then cancelled.
        await db.plan_locks.insert_one({"_id": plan_id, "owner": "test",
                                        "expires_at": datetime.now(UTC) + timedelta(hours=1)})
        asked = await http.post(f"/api/decisions/{target}/corrections",
                                json={"mode": "revert", "guidance": "Use <b>Postgres</b>"})
        assert asked.status_code == 202, asked.text
        cid = asked.json()["correction_id"]
        assert await wait_for_count(db, "corrections", 1, timeout=30) == 1
        listed = (await http.get("/api/corrections", params={"plan": plan_id})).json()
        assert [c["actions"] for c in listed["corrections"]] == [["cancel"]]
        done = await http.post(f"/api/corrections/{cid}/cancel", json={})
        assert done.status_code == 200 and done.json()["status"] == "cancelled", done.text
        again = await http.post(f"/api/corrections/{cid}/cancel", json={})
        assert again.status_code == 409
        await db.plan_locks.delete_one({"_id": plan_id})

        # Applied: the tree changes, the diff says what changed.
        cid = (await http.post(f"/api/decisions/{target}/corrections",
                               json={"mode": "revert"})).json()["correction_id"]

        async def applied() -> Any:
            r = await http.get(f"/api/corrections/{cid}")  # 404 until the ledger has it
            c = r.json()
            return c if r.status_code == 200 and c["correction"]["status"] == "applied" \
                else None
        shown = await until(applied, 60)
        assert shown["diff"]["superseded_count"] >= 1 and shown["attempts"]
        roots = (await http.get(f"/api/plans/{plan_id}/tree")).json()["nodes"]
        kids = (await http.get(f"/api/plans/{plan_id}/tree",
                               params={"parent": roots[0]["decision_id"]})).json()["nodes"]
        assert target not in [k["decision_id"] for k in kids]
        assert shown["correction"]["new_decision_id"] in [k["decision_id"] for k in kids]
        # The tree as it was: just before the correction, and the one it produced.
        before = (await http.get(f"/api/plans/{plan_id}/as-of",
                                 params={"at": cid, "before": "1"})).json()
        after = (await http.get(f"/api/plans/{plan_id}/as-of", params={"at": cid})).json()
        new_id_ = shown["correction"]["new_decision_id"]
        assert target in [x["decision_id"] for x in before["decisions"]]
        assert new_id_ not in [x["decision_id"] for x in before["decisions"]]
        assert target not in [x["decision_id"] for x in after["decisions"]]
        assert after["cut"]["sequence_number"] == before["cut"]["sequence_number"] + 1
        assert (await http.get(f"/api/plans/{plan_id}/as-of",
                               params={"at": "yesterday"})).status_code == 400
        assert (await http.get(f"/api/plans/{plan_id}/as-of",
                               params={"at": new_id()})).status_code == 404
        # Counted without reading the decisions: the plan's counter and its corrections.
        summary = (await http.get(f"/api/plans/{plan_id}")).json()
        current = await db.decisions.count_documents({"plan_id": plan_id,
                                                      "superseded_by": None})
        assert summary["decisions"] == 9 and summary["current"] == current


async def test_retry_and_other_refusals(cli_workers: InProcessWorkers, console: Console,
                                        nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=4)
    target = tree[1]["decision_id"]
    async with httpx.AsyncClient(base_url=console.url, timeout=60) as http:
        first = (await http.post(f"/api/decisions/{target}/corrections",
                                 json={"mode": "revert"})).json()["correction_id"]

        async def status(cid: str) -> str | None:
            r = await http.get(f"/api/corrections/{cid}")
            return r.json()["correction"]["status"] if r.status_code == 200 else None
        await until(lambda: _is(status(first), "applied"), 60)
        # Superseded now: the console refuses at once, as the CLI does.
        again = await http.post(f"/api/decisions/{target}/corrections", json={"mode": "revert"})
        assert again.status_code == 409 and "already superseded" in again.json()["error"]
        # Sent past the console (as an agent's client may), the ledger ends it FAILED;
        # the console offers the retry (the lifecycle allows it), sends it, and shows
        # the ledger's own refusal: the target is still superseded.
        plan_id = tree[0]["plan_id"]
        failed = await console.deps.ops.request(plan_id, target, "revert")
        await until(lambda: _is(status(failed), "failed"), 60)
        listed = (await http.get("/api/corrections", params={"status": "failed"})).json()
        assert [x["actions"] for x in listed["corrections"]] == [["retry"]]
        retried = await http.post(f"/api/corrections/{failed}/retry", json={"reason": "again"})
        assert retried.status_code == 409, retried.text
        assert "cannot be retried" in retried.json()["error"]
        c = (await http.get(f"/api/corrections/{first}")).json()["correction"]
        assert c["actions"] == []
        for verb in ("cancel", "retry"):
            refused = await http.post(f"/api/corrections/{first}/{verb}", json={})
            assert refused.status_code == 409 and "applied" in refused.json()["error"]
        assert (await http.post(f"/api/corrections/{first}/fail", json={})).status_code == 400
        assert (await http.post(f"/api/corrections/{first}/fail",
                                json={"reason": "x" * 1001})).status_code == 400


async def test_fail_a_correction_stuck_executing(
        console: Console, nats_server: ManagedServer, mongo_uri: str, db_name: str,
        nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    async with held_executing(nats_server.url, mongo_uri, db_name, db, nc, tmp_path) as held, \
            httpx.AsyncClient(base_url=console.url, timeout=60) as http:
        cid = held.correction_id
        shown = (await http.get(f"/api/corrections/{cid}")).json()
        assert shown["correction"]["status"] == "executing"
        assert shown["correction"]["actions"] == ["fail"]
        assert [a["state"] for a in shown["attempts"]] == ["executing"]
        for verb in ("cancel", "retry"):
            refused = await http.post(f"/api/corrections/{cid}/{verb}", json={})
            assert refused.status_code == 409 and "executing" in refused.json()["error"]

        done = await http.post(f"/api/corrections/{cid}/fail",
                               json={"reason": "archive volume <b>lost</b>"})
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "failed"
        shown = (await http.get(f"/api/corrections/{cid}")).json()
        c = shown["correction"]
        assert c["status"] == "failed" and c["actions"] == ["retry"]
        assert c["error"] == "failed by an operator: archive volume <b>lost</b>"
        assert c["history"][-1]["reason"] == "archive volume <b>lost</b>"
        assert [a["state"] for a in shown["attempts"]] == ["failed"]
        # Nothing of the revert was applied: the target is still current.
        target = (await http.get(f"/api/decisions/{held.target}")).json()["decision"]
        assert target["superseded_by"] is None
        again = await http.post(f"/api/corrections/{cid}/fail", json={"reason": "again"})
        assert again.status_code == 409 and "failed" in again.json()["error"]


async def test_affected_beyond_the_dry_runs_first_100(console: Console,
                                                      db: AsyncDatabase[Document]) -> None:
    """The dry-run reply lists 100 affected IDs; the page asks which of the nodes it
    draws are affected, and gets every one (the walk is the dry run's own)."""
    wide = await wide_plan(db, children=130)
    drawn = [x.decision_id for x in wide.decisions]
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        url = f"/api/decisions/{wide.a}/affected"
        found = (await http.post(url, json={"ids": drawn})).json()
        assert set(found["affected"]) == wide.affected and len(found["affected"]) == 137
        assert found["affected_count"] == 137 and found["complete"]
        # A level at a time (the last page of C), lower case and repeats as given.
        page = [c.lower() for c in wide.cs[100:]] + [wide.root, wide.cs[-1]]
        assert (await http.post(url, json={"ids": page})).json()["affected"] == wide.cs[100:]
        for bad in ({"ids": "all"}, {"ids": ["nope"]}, {"ids": [wide.a] * 1001}, {}):
            assert (await http.post(url, json=bad)).status_code == 400, bad
        assert (await http.post(f"/api/decisions/{new_id()}/affected",
                                json={"ids": []})).status_code == 404


async def _is(value: Any, expected: str) -> bool:
    return await value == expected


async def test_dead_letters_and_invariants(cli_workers: InProcessWorkers, agents: Agents,
                                           console: Console, nc: nats.NATS,
                                           db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=2)
    plan_id = tree[0]["plan_id"]
    await nc.jetstream().publish(f"decisions.recorded.{plan_id}", b"<script>alert(1)</script>",
                                 headers={"Nats-Msg-Id": new_id()})
    await nc.jetstream().publish(f"decisions.recorded.{plan_id}", b"[]")  # no Nats-Msg-Id
    assert await wait_for_count(db, "dead_letters", 2, timeout=30) == 2
    inv = (await agents.ok("invariant", "add", "no-prod-writes", "--description",
                           "Never write to production", "--json")).json
    await agents.ok("invariant", "add", "no-prod-writes", "--description", "Ask first",
                    "--plan", plan_id)
    vid = new_id()
    await nc.jetstream().publish(f"invariants.violations.{plan_id}", json.dumps({
        "violation_id": vid, "invariant_id": inv["id"], "plan_id": plan_id,
        "severity": "error", "details": "wrote to production"}).encode(),
        headers={"Nats-Msg-Id": vid})
    assert await wait_for_count(db, "invariant_violations", 1, timeout=30) == 1
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        by_payload = {(await http.get(f"/api/dead-letters/{x['id']}")).json()["payload"]: x
                      for x in (await http.get("/api/dead-letters")).json()["dead_letters"]}
        dl, plain = by_payload["<script>alert(1)</script>"], by_payload["[]"]
        # Refused for its own bytes: a retry would be refused again, so none is made.
        assert not dl["retryable"] and "rule not_json" in dl["not_retryable"]
        retried = await http.post(f"/api/dead-letters/{dl['id']}/retry", json={})
        assert retried.status_code == 409 and "refuse them again" in retried.json()["error"]
        assert await db.dead_letters.count_documents({"_id": dl["id"]}) == 1
        # Every delivery failed (a server was down): retried, stored again (and refused
        # again for its schema, as a new dead letter).
        flaky = DeadLetter.of_message(
            id="DECISIONS:900001", subject=f"decisions.recorded.{plan_id}", headers={},
            data=b"[]", plan_id=plan_id, decision_id=None, rejected_at=datetime.now(UTC),
            delivered=5, errors=[RuleViolation(rule=Rule.MAX_DELIVERIES, message="down")])
        await DeadLetterRepository(db).keep([flaky])
        retried = await http.post(f"/api/dead-letters/{flaky.id}/retry", json={})
        assert retried.status_code == 200 and retried.json()["deleted"], retried.text
        again = f"DECISIONS:{retried.json()['stream_sequence']}"
        assert await wait_for_count(db, "dead_letters", 1, timeout=30,
                                    query={"_id": again}) == 1
        assert (await http.post(f"/api/dead-letters/{flaky.id}/retry", json={})
                ).status_code == 404
        # Discarded through the workers, with who and why; bulk, by the rule.
        assert (await http.post(f"/api/dead-letters/{dl['id']}/discard", json={})
                ).status_code == 400  # a reason is required
        sent = await http.post("/api/dead-letters/discard",
                               json={"rule": "schema", "reason": "a test sender"})
        assert sent.status_code == 202 and sorted(sent.json()["discarded"]) == sorted(
            [plain["id"], again])
        assert await wait_for_count(db, "dead_letters", 2, timeout=30,
                                    query={"discarded_at": {"$ne": None}}) == 2
        kept = (await http.get("/api/dead-letters")).json()["dead_letters"]
        assert [x["id"] for x in kept] == [dl["id"]]
        gone = (await http.get("/api/dead-letters", params={"discarded": "1"})).json()
        assert {x["discarded_by"] for x in gone["dead_letters"]} == {"unverified"}

        effective = (await http.get("/api/invariants", params={"plan": plan_id})).json()
        [winner] = effective["effective"]
        assert winner["scope"] == "PLAN" and effective["precedence"][0] == "PLAN"
        [v] = (await http.get("/api/violations", params={"unresolved": "1"})).json()[
            "violations"]
        assert v["violation_id"] == vid and v["blocks"]
        assert (await http.post(f"/api/violations/{vid}/resolve", json={})).status_code == 200
        assert (await http.post(f"/api/violations/{vid}/resolve", json={})).status_code == 409
        assert (await http.get("/api/violations", params={"unresolved": "1"})).json()[
            "violations"] == []


async def test_beyond_loopback_without_a_token_it_refuses_to_start(agents: Agents) -> None:
    r = await agents("console", "--host", "0.0.0.0", env={"CONSOLE_TOKEN": ""})
    assert r.code == 2, (r.out, r.err)
    assert "CONSOLE_TOKEN" in r.err and "Traceback" not in r.err


async def test_a_token_guards_everything(db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    token = "s3cret-token-0123456789"
    async with serve_console(db, nc, token=token) as c, \
            httpx.AsyncClient(base_url=c.url, timeout=10) as http:
        assert (await http.get("/api/plans")).status_code == 401
        assert (await http.get("/", follow_redirects=False)).status_code == 303
        assert (await http.get("/login")).status_code == 200
        assert (await http.get("/api/plans", headers={
            "Authorization": "Bearer wrong"})).status_code == 401
        assert (await http.get("/api/plans", headers={
            "Authorization": f"Bearer {token}"})).status_code == 200
        bad = await http.post("/login", data={"token": "nope"})
        assert bad.status_code == 401
        good = await http.post("/login", data={"token": token}, follow_redirects=False)
        assert good.status_code == 303 and "httponly" in good.headers["set-cookie"].lower()
        assert (await http.get("/api/plans")).status_code == 200  # the cookie now
        page = await http.get("/")
        assert "script-src 'self'" in page.headers["content-security-policy"]
