"""Approvals against the real servers and workers, signatures verified: a decision held
for a person is granted from the CLI (the agent's gate opens and it proceeds), denied
with guidance turned into an append correction, expired; approvers who may not decide
are refused with their named rule; a decision changed after approval is not approved;
hostile verdicts are dead-lettered, bounded, and hold back no valid one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.approvals import GateStatus
from clients.recorder import DecisionRecorder
from contracts.decisions.model import Decision
from contracts.decisions.tools import ToolCall
from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalVerdict, Verdict
from contracts.invariants.approvals import decision_digest
from contracts.invariants.families import VERDICTS
from contracts.invariants.severity import Consequence
from contracts.shared.bounds import MAX_ERRORS
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from deploy.embedded import ManagedServer
from services.invariants import InvariantService
from store.database import Document
from store.invariant_store import InvariantStore
from tests.conftest import worker_env
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents
from tests.integration.wire import events, until
from tests.trust_support import Member, member, write_principals, write_seed

__all__ = ["agents"]

pytestmark = pytest.mark.e2e

AGENT = member("deploy-agent", Role.AGENT)
ALICE = member("alice", Role.OPERATOR, "billing")
BOB = member("bob", Role.OPERATOR, "other")
STRANGER = member("stranger", Role.OPERATOR, "*")  # not in the principals file
WORKER = member("ledger-worker", Role.WORKER)
PROD = '!(decision_type == "tool_invocation" && tool.arguments.path.startsWith("deploy/prod/"))'


@pytest.fixture
async def signed_workers(nats_server: ManagedServer, mongo_uri: str,
                         db: AsyncDatabase[Document], db_name: str,
                         tmp_path: Path) -> AsyncIterator[InProcessWorkers]:
    principals = write_principals(tmp_path / "principals.toml", AGENT, ALICE, BOB, WORKER)
    env = worker_env(nats_server.url, mongo_uri, db_name, LEDGER_PRINCIPALS=str(principals),
                     NATS_NKEY_SEED=str(write_seed(tmp_path / "worker.seed", WORKER)),
                     APPROVAL_SWEEP_SECONDS="0.2", CORRECTIONS_RETRY_DELAY="0.2",
                     ARCHIVE_ROOT=str(tmp_path / "archive"))
    w = InProcessWorkers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    service = InvariantService.from_store(InvariantStore.open(db), _NoPublish())
    await service.add_invariant("prod-needs-a-person", "Writes under deploy/prod/ need a "
                                "person's approval", check=PROD, consequence=Consequence.HOLD)
    try:
        yield w
    finally:
        await w.stop()


class _NoPublish:
    async def publish_all(self, events: Any) -> None:
        return None


@pytest.fixture
async def rec(signed_workers: InProcessWorkers, nats_server: ManagedServer
              ) -> AsyncIterator[DecisionRecorder]:
    async with DecisionRecorder.connect(nats_server.url, seed=AGENT.seed) as r:
        yield r


async def write(rec: DecisionRecorder, parent: Decision, path: str) -> Decision:
    return await rec.record(parent=parent, decision_type="tool_invocation",
                            question="Where does the config go?", chosen_option=f"write {path}",
                            context="deploy", tool=ToolCall(name="write_file",
                                                            arguments={"path": path}))


async def held(rec: DecisionRecorder, root: Decision, path: str = "deploy/prod/app.yaml"
               ) -> Decision:
    d = await write(rec, root, path)
    assert (await rec.wait_persisted(d, timeout=20)).hold == "awaiting_approval"
    return d


async def verdict(nc: nats.NATS, who: Member | None, d: Decision, what: Verdict,
                  digest: str | None = None, **fields: Any) -> str:
    v = ApprovalVerdict(plan_id=d.plan_id, decision_id=d.decision_id, verdict=what,
                        digest=digest or decision_digest(d), **fields)
    subject = subjects.verdicts(d.plan_id)
    body = v.model_dump(mode="json", exclude_none=True)
    if who is None:
        data, headers = json.dumps(body).encode(), {"Nats-Msg-Id": v.request_id}
    else:
        data, headers = who.signed(VERDICTS.name, subject, v.request_id, body)
    await nc.jetstream().publish(subject, data, headers=headers)
    return v.request_id


async def outcome(db: AsyncDatabase[Document], request_id: str) -> dict[str, Any]:
    found: dict[str, Any] = await until(
        lambda: db["approval_verdicts"].find_one({"_id": request_id}))
    return found


async def test_granted_from_the_cli_then_denied_with_guidance_as_an_append(
        rec: DecisionRecorder, agents: Agents, db: AsyncDatabase[Document],
        nc: nats.NATS, tmp_path: Path) -> None:
    alice = {"NATS_NKEY_SEED": str(write_seed(tmp_path / "alice.seed", ALICE))}
    root = await rec.root("Ship the billing config", context="deploy", project="billing")
    first = await held(rec, root)
    gate = asyncio.create_task(rec.gate(first, timeout=60))
    listed = (await agents.ok("approval", "list", "--json")).json
    assert [a["decision_id"] for a in listed] == [first.decision_id]
    shown = await agents.ok("approval", "show", first.decision_id, env=alice)
    assert "deploy/prod/app.yaml" in shown.out and "prod-needs-a-person" in shown.out
    # The plan's Execute phase waits while the approval does.
    blocked = await write(rec, root, "deploy/staging/app.yaml")
    with pytest.raises(Exception, match="reconciliation_blocked"):
        await rec.wait_persisted(blocked, timeout=20)

    await agents.ok("approval", "approve", first.decision_id, "--reason", "reviewed",
                    env=alice)
    opened = await gate
    assert opened.status is GateStatus.APPROVED and opened.decided_by == "alice"
    stored = await db["approvals"].find_one({"_id": first.decision_id})
    assert stored["status"] == "granted" and stored["verified"] and stored["signature"]
    assert stored["reason"] == "reviewed" and stored["digest"] == decision_digest(first)
    assert (await db["decision_holds"].find_one({"_id": first.decision_id}))["status"] \
        == "released"
    [violation] = await db["invariant_violations"].find(
        {"decision_id": first.decision_id}).to_list()
    assert violation["resolved_by"] == "alice"
    # The agent proceeds: its next Execute decision is recorded.
    after = await write(rec, first, "deploy/staging/app.yaml")
    assert (await rec.wait_persisted(after, timeout=20)).hold is None

    second = await held(rec, after, "deploy/prod/db.yaml")
    denied = await agents.ok("approval", "deny", second.decision_id, "--reason", "not now",
                             "--guidance", "Write it to staging first", "--append",
                             "--json", env=alice)
    told = await rec.gate(second, timeout=30)
    assert told.status is GateStatus.DENIED and told.reason == "not now"
    assert told.guidance == "Write it to staging first"
    correction = await until(lambda: db["corrections"].find_one(
        {"_id": denied.json["correction_id"]}))
    assert correction["mode"] == "append" and correction["requested_by"] == "alice"
    assert told.append_correction_id == denied.json["correction_id"]
    seen = await events(nc, f"{subjects.APPROVAL_PREFIX}.{root.plan_id}.*", settle=0.3)
    assert [s.rsplit(".", 1)[1] for s, _, _ in seen] == [
        "requested", "granted", "requested", "denied"]
    assert [h["ce-type"] for _, _, h in seen][:2] == [
        "io.decision-ledger.approval.requested.v1", "io.decision-ledger.approval.granted.v1"]
    assert seen[0][2]["ce-subject"] == f"plan/{root.plan_id}/decision/{first.decision_id}"
    # The approvers' resolutions are links of the plan's chain, their signatures verified.
    await agents.ok("audit", "verify", root.plan_id, "--principals",
                    str(tmp_path / "principals.toml"))


async def test_who_may_decide_what_and_until_when(
        rec: DecisionRecorder, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    root = await rec.root("Ship the billing config", context="deploy", project="billing")
    d = await held(rec, root)

    refused = {who.name if who else "unsigned": await verdict(nc, who, d, Verdict.GRANT)
               for who in (BOB, None)}
    assert (await outcome(db, refused["bob"]))["rule"] == "operator_scope"
    assert (await outcome(db, refused["unsigned"]))["rule"] == "approver_refused"
    for who, rule in ((STRANGER, "unknown_key"), (AGENT, "wrong_role")):
        rid = await verdict(nc, who, d, Verdict.GRANT)
        letter = await until(lambda rid=rid: db["dead_letters"].find_one(
            {"headers.Nats-Msg-Id": rid}))
        assert [e["rule"] for e in letter["errors"]] == [rule]
    wrong = await verdict(nc, ALICE, d, Verdict.GRANT, digest="sha256:" + "0" * 64)
    assert (await outcome(db, wrong))["rule"] == "approval_digest"

    # Hostile verdicts: each its own dead letter with a named rule, bounded.
    js = nc.jetstream()
    for data in (b"\xff", b"[" * 5000, json.dumps({f"k{i}": i for i in range(500)}).encode()):
        await js.publish(subjects.verdicts(d.plan_id), data, headers={"Nats-Msg-Id": new_id()})
    letters = await until(lambda: _letters(db, d.plan_id, 3))
    assert all(0 < len(x["errors"]) <= MAX_ERRORS + 1 and x["errors"][0]["rule"]
               for x in letters)

    # Granted for the content alice looked at; the agent's changed decision is not approved.
    assert (await outcome(db, await verdict(nc, ALICE, d, Verdict.GRANT)))["status"] \
        == "applied"
    changed = d.model_copy(update={"tool": ToolCall(name="write_file",
                                                    arguments={"path": "deploy/prod/other"})})
    assert (await rec.gate(changed, timeout=20)).status is GateStatus.CHANGED
    assert (await rec.gate(d, timeout=20)).status is GateStatus.APPROVED
    again = await verdict(nc, ALICE, d, Verdict.DENY, reason="too late")
    assert (await outcome(db, again))["rule"] == "approval_closed"

    # Changed in the store after it was held: no verdict approves it.
    tampered = await held(rec, d, "deploy/prod/other.yaml")
    await db["decisions"].update_one({"_id": tampered.decision_id},
                                     {"$set": {"chosen_option": "something else"}})
    late = await verdict(nc, ALICE, tampered, Verdict.GRANT)
    assert (await outcome(db, late))["rule"] == "approval_digest"

    # Nobody decided in time: it expires, the agent is told, a verdict after is refused.
    await db["approvals"].update_one({"_id": tampered.decision_id},
                                     {"$set": {"expires_at": root.created_at}})
    assert (await rec.gate(tampered, timeout=20)).status is GateStatus.EXPIRED
    assert (await db["decision_holds"].find_one({"_id": tampered.decision_id}))["status"] \
        == "refused"
    closed = await verdict(nc, ALICE, tampered, Verdict.GRANT)
    assert (await outcome(db, closed))["rule"] == "approval_closed"


async def _letters(db: AsyncDatabase[Document], plan: str, n: int) -> list[Document] | None:
    found = await db["dead_letters"].find(
        {"subject": subjects.verdicts(plan), "errors.rule": {"$nin": [
            "unknown_key", "wrong_role"]}}).to_list()
    return found if len(found) >= n else None
