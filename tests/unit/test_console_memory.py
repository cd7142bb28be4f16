"""The console's read routes over the in-memory store: every read goes through the read
port (services/read_ports.py), approvals included, so the same app serves a scene set
in memory, no database server needed.

The app is called in-process (httpx's ASGI transport, no lifespan: the live hub is not
started). The NATS client the operator client and the publisher hold is never
connected: nothing here writes, and a read that tried to publish would fail loudly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from nats.aio.client import Client

from console.app import create_app
from console.config import ConsoleConfig
from contracts.corrections.changes import Changes
from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.model import Decision
from contracts.invariants.approvals import DEFAULT_TTL, decision_digest
from contracts.invariants.holds import Hold, HoldReason, HoldStatus
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.severity import Consequence, Severity
from contracts.invariants.violations import FoundBy, InvariantViolation
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import new_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.rules import Rule, RuleViolation
from tests.console_deps import deps_over
from tests.factories import decision, root
from tests.memory_store import MemoryStore

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def model(raw: dict[str, object]) -> Decision:
    raw.setdefault("artifacts_produced", [])
    return Decision.model_validate(raw)


def no_event(v: InvariantViolation, blocked: bool) -> OutgoingEvent:
    return OutgoingEvent(f"test.{v.violation_id}", b"{}", f"{v.violation_id}:{blocked}")


async def scene(m: MemoryStore) -> tuple[list[Decision], Correction, DeadLetter]:
    """root -> a -> (b, c); a revert of b requested; a dead letter; an open violation."""
    r = model(root())
    plan = r.plan_id
    a = model(decision(plan, r.decision_id))
    b = model(decision(plan, a.decision_id, "tool_invocation"))
    c = model(decision(plan, a.decision_id, "validation_response"))
    tree = await m.load_plan([r, a, b, c])
    correction = Correction.from_request(CorrectionRequest(
        plan_id=plan, decision_id=b.decision_id, mode=CorrectionMode.REVERT,
        guidance="Use the other tool.", requested_by="alice"), NOW)
    await m.writer.commit(Changes(correction, None), NOW)
    letter = DeadLetter.of_message(
        id=f"DECISIONS:{new_id()}", subject=f"decisions.recorded.{plan}", headers={},
        data=b"{", plan_id=plan, decision_id=None, rejected_at=NOW, delivered=1,
        errors=[RuleViolation(rule=Rule.SCHEMA, field="body", message="not JSON")])
    await m.dead_letters.keep([letter])
    inv = Invariant(name="tests-pass", description="run them", scope=InvariantScope.GLOBAL,
                    created_at=NOW)
    await m.invariants.add(inv)
    await m.violations.record(InvariantViolation.model_validate({
        "violation_id": new_id(), "invariant_id": inv.id, "plan_id": plan,
        "decision_id": c.decision_id, "severity": Severity.ERROR, "reported_at": NOW,
        "details": "tests skipped"}), no_event, NOW)
    return tree, correction, letter


@pytest.fixture
async def memory() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
async def http(memory: MemoryStore) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(deps_over(memory, Client()), ConsoleConfig())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8090") as client:
        yield client


async def test_plans_and_a_tree_read_from_memory(memory: MemoryStore,
                                                 http: httpx.AsyncClient) -> None:
    tree, _correction, _letter = await scene(memory)
    r, a, b, c = tree
    [p] = (await http.get("/api/plans")).json()["plans"]
    assert p["plan_id"] == r.plan_id and p["decisions"] == 4 and p["current"] == 4
    assert p["open_corrections"] == 1 and p["open_violations"] == 1
    roots = (await http.get(f"/api/plans/{r.plan_id}/tree")).json()
    assert [(n["decision_id"], n["child_count"]) for n in roots["nodes"]] == [
        (r.decision_id, 1)]
    level = (await http.get(f"/api/plans/{r.plan_id}/tree",
                            params={"parent": a.decision_id, "limit": 1})).json()
    assert [n["decision_id"] for n in level["nodes"]] == [b.decision_id]
    assert level["nodes"][0]["corrections"][0]["actions"] == ["cancel"]
    rest = (await http.get(f"/api/plans/{r.plan_id}/tree", params={
        "parent": a.decision_id, "after": level["next_after"]})).json()
    assert [n["decision_id"] for n in rest["nodes"]] == [c.decision_id]
    shown = (await http.get(f"/api/decisions/{c.decision_id}")).json()
    assert [x["decision_id"] for x in shown["path"]] == [r.decision_id, a.decision_id]
    found = (await http.get("/api/find", params={"id": b.decision_id.lower()})).json()
    assert found == {"kind": "decision", "plan_id": r.plan_id, "decision_id": b.decision_id,
                     "correction_id": None}
    assert (await http.get(f"/api/decisions/{new_id()}")).status_code == 404
    then = await http.get(f"/api/plans/{r.plan_id}/as-of", params={"at": "2999-01-01T00:00"})
    assert then.status_code == 200 and then.json()["count"] == 4
    assert then.json()["cut"] == {"time": "2999-01-01T00:00:00+00:00"}
    assert (await http.get(f"/api/plans/{r.plan_id}/as-of",
                           params={"at": "yesterday"})).status_code == 400


async def test_corrections_dead_letters_and_invariants_read_from_memory(
        memory: MemoryStore, http: httpx.AsyncClient) -> None:
    tree, correction, letter = await scene(memory)
    plan = tree[0].plan_id
    listed = (await http.get("/api/corrections", params={"plan": plan})).json()
    assert [x["correction_id"] for x in listed["corrections"]] == [correction.correction_id]
    one = (await http.get(f"/api/corrections/{correction.correction_id}")).json()
    assert one["correction"]["status"] == "pending" and one["attempts"] == []
    letters = (await http.get("/api/dead-letters")).json()["dead_letters"]
    # Refused for its schema: the same bytes would be again, so no retry is offered.
    assert [x["id"] for x in letters] == [letter.id] and not letters[0]["retryable"]
    assert "rule schema would refuse them again" in letters[0]["not_retryable"]
    shown = (await http.get(f"/api/dead-letters/{letter.id}")).json()
    assert shown["payload"] == "{" and shown["errors"][0]["rule"] == "schema"
    invariants = (await http.get("/api/invariants", params={"plan": plan})).json()
    assert [(i["name"], i["in_force"]) for i in invariants["invariants"]] == [
        ("tests-pass", True)]
    violations = (await http.get("/api/violations", params={"unresolved": "1"})).json()
    assert [(v["plan_id"], v["blocks"]) for v in violations["violations"]] == [(plan, True)]


async def test_the_approvals_queue_reads_from_memory(memory: MemoryStore,
                                                     http: httpx.AsyncClient) -> None:
    tree, _correction, _letter = await scene(memory)
    b = tree[2]
    reason = HoldReason(invariant_id=new_id(), invariant_name="prod-needs-a-person",
                        severity=Severity.ERROR, consequence=Consequence.HOLD,
                        found_by=FoundBy.CHECK)
    await memory.approvals.open([Hold(
        decision_id=b.decision_id, plan_id=b.plan_id, status=HoldStatus.AWAITING_APPROVAL,
        reasons=[reason], digest=decision_digest(b), created_at=NOW, updated_at=NOW)],
        NOW, DEFAULT_TTL)
    [queued] = (await http.get("/api/approvals")).json()["approvals"]
    assert queued["decision_id"] == b.decision_id and queued["status"] == "requested"
    assert queued["decision"]["decision_type"] == "tool_invocation"
    shown = (await http.get(f"/api/decisions/{b.decision_id}/approval")).json()
    assert shown["digest"] == decision_digest(b)
    assert (await http.get(f"/api/decisions/{tree[3].decision_id}/approval")
            ).status_code == 404
