"""The judge end to end: workers with JUDGE_URL pointed at a local chat server, word-only
invariants in force, decisions recorded awaiting the judge and then released, refused
or held; timeouts, HTTP errors and garbage hold the decision and never release it; the
agent's gate learns the judge's release or refusal from its event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from clients.approvals import JUDGE, GateStatus
from clients.recorder import DecisionRecorder
from contracts.corrections.resume_points import ResumePoint
from contracts.invariants import subjects
from contracts.invariants.model import InvariantScope
from contracts.invariants.severity import Consequence, Severity
from deploy.embedded import ManagedServer
from services.invariants import InvariantService
from store.database import Document
from store.decisions import from_document
from store.invariant_store import InvariantStore
from tests.conftest import Workers, worker_env
from tests.factories import decision, root
from tests.integration.wire import publish_all, until
from tests.judge_server import JudgeServer, judge_server

__all__ = ["judge_server"]

pytestmark = pytest.mark.e2e


@pytest.fixture
async def judged(nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
                 db_name: str, tmp_path: Path, judge_server: JudgeServer,
                 nc: nats.NATS) -> AsyncIterator[InvariantService]:
    env = worker_env(nats_server.url, mongo_uri, db_name, JUDGE_URL=judge_server.url,
                     JUDGE_TIMEOUT_SECONDS="1", JUDGE_POLL_SECONDS="0.1",
                     JUDGE_API_KEY_ENV="TEST_JUDGE_KEY", TEST_JUDGE_KEY="sk-e2e")
    w = Workers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        yield InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    finally:
        w.stop()


async def settled(db: AsyncDatabase[Document], d: dict[str, Any]) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        hold = await db["decision_holds"].find_one({"_id": d["decision_id"]})
        return hold if hold and hold["status"] != "awaiting_judge" else None
    found: dict[str, Any] = await until(probe)
    return found


async def test_verdicts_release_refuse_or_hold_and_failures_never_release(
        judged: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document],
        judge_server: JudgeServer) -> None:
    js = nc.jetstream()
    await judged.add_invariant("no-prod", "Never touch production")
    await judged.add_invariant("tidy", "Keep the tree tidy", severity=Severity.WARNING)
    await judged.add_invariant("ask-deploys", "Deploys need a person",
                               InvariantScope.PROJECT, "ship", consequence=Consequence.HOLD)
    r = root()
    await publish_all(js, [r])
    await until(lambda: db["decisions"].find_one({"_id": r["decision_id"]}))
    plan, parent = r["plan_id"], r["decision_id"]
    cases = {word: decision(plan, parent, "strategy_choice", chosen_option=f"go {word}")
             for word in ("KEEP", "BROKEN", "SLOW", "FAIL500", "GARBAGE", "REFUSE")}
    await publish_all(js, list(cases.values()))
    for d in cases.values():  # recorded at once, awaiting the judge
        await until(lambda d=d: db["decisions"].find_one({"_id": d["decision_id"]}))

    assert (await settled(db, cases["KEEP"]))["status"] == "released"
    broke = await settled(db, cases["BROKEN"])
    assert broke["status"] == "refused"
    assert {x["invariant_name"] for x in broke["reasons"]} == {"no-prod", "tidy"}
    for word in ("SLOW", "FAIL500", "GARBAGE", "REFUSE"):
        hold = await settled(db, cases[word])
        assert hold["status"] == "awaiting_approval", word
        [no_prod] = [x for x in hold["reasons"] if x["invariant_name"] == "no-prod"]
        assert "the judge failed" in no_prod["detail"], word
        assert no_prod["consequence"] == "hold"

    violations = [v async for v in db["invariant_violations"].find(
        {"decision_id": cases["BROKEN"]["decision_id"]})]
    assert {(v["severity"], v["found_by"]) for v in violations} == \
        {("error", "judge"), ("warning", "judge")}
    assert await judged.blocked_plans([plan]) == {plan}
    assert all(req["headers"]["Authorization"] == "Bearer sk-e2e"
               for req in judge_server.requests)
    # The judge's record of each ruling hangs under the recorded decision.
    enforced = await until(lambda: db["decisions"].find_one(
        {"parent_decision_id": cases["BROKEN"]["decision_id"],
         "decision_type": "invariant_enforced"}))
    assert enforced["chosen_option"].startswith(("refused", "recorded"))

    # The PROJECT invariant with consequence hold: broken is held for approval.
    ship = root(project="ship")
    await publish_all(js, [ship])
    await until(lambda: db["decisions"].find_one({"_id": ship["decision_id"]}))
    deploy = decision(ship["plan_id"], ship["decision_id"], "strategy_choice",
                      chosen_option="deploy BREAK-ask-deploys")
    both = decision(ship["plan_id"], ship["decision_id"], "strategy_choice",
                    chosen_option="deploy BREAK-ask-deploys BREAK-no-prod")
    await publish_all(js, [deploy, both])
    held = await settled(db, deploy)
    assert held["status"] == "awaiting_approval"
    assert [x["invariant_name"] for x in held["reasons"]] == ["ask-deploys"]
    assert (await settled(db, both))["status"] == "refused"  # refuse wins over hold


async def test_the_gate_hears_the_judge(judged: InvariantService, nc: nats.NATS,
                                        nats_server: ManagedServer,
                                        db: AsyncDatabase[Document]) -> None:
    """A decision awaiting the judge: the agent's gate answers approved when the judge
    releases it, refused (with the broken invariant) when it refuses it, and changed when
    the decision passed is not the one judged; each settlement is one event, with its
    CloudEvents type. Hostile bytes on the same subjects, before the real events, are
    read past."""
    js = nc.jetstream()
    await judged.add_invariant("no-prod", "Never touch production")
    r = root()
    await publish_all(js, [r])
    await until(lambda: db["decisions"].find_one({"_id": r["decision_id"]}))
    keep = decision(r["plan_id"], r["decision_id"], "strategy_choice", chosen_option="go KEEP")
    broken = decision(r["plan_id"], r["decision_id"], "strategy_choice",
                      chosen_option="go BROKEN")
    # Among the real events, what a gate must read past: bytes, deep nesting, a huge
    # list, an odd date, and a release naming another decision.
    hold_subject = subjects.hold_event(r["plan_id"], "released")
    other = {"event_type": "released", "hold": {
        "decision_id": decision(r["plan_id"], r["decision_id"], "strategy_choice")[
            "decision_id"], "plan_id": r["plan_id"], "status": "released",
        "created_at": "2026-12-02T00:00:00Z", "updated_at": "2026-12-02T00:00:00Z"}}
    for junk in (b"\xff\x00garbage", b"[" * 5000 + b"]" * 5000,
                 json.dumps({"event_type": "released", "hold": list(range(100_000))}).encode(),
                 json.dumps({**other, "hold": {**other["hold"],
                                               "created_at": "31/31/2026"}}).encode(),
                 json.dumps(other).encode()):
        await js.publish(hold_subject, junk)
        await js.publish(subjects.approval_event(r["plan_id"], "granted"), junk)
    async with DecisionRecorder.connect(nats_server.url) as rec:
        gates = [asyncio.create_task(rec.gate(ResumePoint(plan_id=d["plan_id"],
                                                          decision_id=d["decision_id"]),
                                              timeout=30))
                 for d in (keep, broken)]
        await publish_all(js, [keep, broken])
        released, refused = await asyncio.gather(*gates)
        assert released.status is GateStatus.APPROVED and released.decided_by == JUDGE
        assert released.held
        assert refused.status is GateStatus.REFUSED and refused.decided_by == JUDGE
        assert refused.reason is not None and refused.reason.startswith("no-prod")

        doc = await db["decisions"].find_one({"_id": keep["decision_id"]})
        assert doc is not None
        stored = from_document(doc)
        assert (await rec.gate(stored, timeout=10)).status is GateStatus.APPROVED
        other = stored.model_copy(update={"chosen_option": "go somewhere else"})
        assert (await rec.gate(other, timeout=10)).status is GateStatus.CHANGED

    for d, status in ((keep, "released"), (broken, "refused")):
        sub = subjects.hold_event(r["plan_id"], status)
        msg = await js.get_last_msg("DECISIONS", sub)
        assert msg.headers is not None and msg.headers["ce-type"].startswith(
            f"io.decision-ledger.hold.{status}."), msg.headers
        assert d["decision_id"] in (msg.data or b"").decode()
