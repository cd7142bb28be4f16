"""A plan with every kind of chained record, written by signed principals through the
running workers (decisions, a violation report, a revert, an append with its child plan)
and in this process as the CLI writes (a violation's resolution, a correction requested
and cancelled): what the audit tests verify, tamper with and export."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from clients.operator import CorrectionClient
from contracts.corrections import subjects as csubjects
from contracts.corrections.families import CANCEL, REQUESTED
from contracts.corrections.requests import CancelRequest, CorrectionRequest
from contracts.invariants import subjects as isubjects
from contracts.invariants.families import EVENTS, VIOLATIONS
from contracts.recording.families import RECORDED
from contracts.shared.families import MessageFamily
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from contracts.shared.timestamps import utc_now
from contracts.trust.policy import FamilyTrust, TrustPolicy, signers
from contracts.trust.verification import Verified
from deploy.embedded import ManagedServer
from services.archive.writer import Archive
from services.corrections.service import CorrectionService
from services.invariants import InvariantService
from store.correction_store import CorrectionStore
from store.database import Document
from store.invariant_store import InvariantStore
from tests.conftest import worker_env
from tests.factories import decision, root, subject
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import until
from tests.trust_support import Member, directory, member, write_principals, write_seed

ROOT = Path(__file__).resolve().parents[2]
VERIFIER = ROOT / "examples" / "verify_audit.py"

AGENT = member("billing-agent", Role.AGENT)
ALICE = member("alice", Role.OPERATOR, "billing")
WORKER = member("ledger-worker", Role.WORKER)
MEMBERS = (AGENT, ALICE, WORKER)


async def start_workers(nats_server: ManagedServer, mongo_uri: str, db_name: str,
                        tmp_path: Path) -> tuple[InProcessWorkers, Path]:
    """The workers verifying against the members' principals file, and that file."""
    principals = write_principals(tmp_path / "principals.toml", *MEMBERS)
    env = worker_env(nats_server.url, mongo_uri, db_name, LEDGER_PRINCIPALS=str(principals),
                     NATS_NKEY_SEED=str(write_seed(tmp_path / "worker.seed", WORKER)),
                     ARCHIVE_ROOT=str(tmp_path / "archive"), CORRECTIONS_RETRY_DELAY="0.2")
    w = InProcessWorkers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    return w, principals


def verified(who: Member, family: MessageFamily, subject: str, msg_id: str,
             body: Mapping[str, Any]) -> Verified:
    """`who`'s signature of a `family` message, verified as a worker would."""
    data, headers = who.signed(family.name, subject, msg_id, dict(body))
    got = FamilyTrust(family.name, signers(family), TrustPolicy(directory(*MEMBERS))
                      ).identify(headers, subject, data, utc_now())
    assert isinstance(got, Verified), got
    return got


async def publish_signed(js: Any, who: Member, ds: list[dict[str, Any]]) -> None:
    for d in ds:
        data, h = who.signed(RECORDED.name, subject(d), d["decision_id"], d)
        await js.publish(subject(d), data, headers=h)


async def ended(db: AsyncDatabase[Document], correction_id: str) -> Document:
    done: Document = await until(lambda: db.corrections.find_one(
        {"_id": correction_id, "status": {"$in": ["applied", "failed", "cancelled"]}}),
        timeout=60)
    return done


@dataclass
class Scene:
    plan: str
    child_plan: str
    decisions: dict[str, str]   # name -> decision_id
    revert: str
    append: str
    cancelled: str
    violation: str


async def record_plan(nc: nats.NATS, db: AsyncDatabase[Document]) -> tuple[str, dict[str, str]]:
    """root -> a -> b -> c, root -> d, signed by the agent, all recorded."""
    top = root(project="billing")
    plan = top["plan_id"]
    a = decision(plan, top["decision_id"], question="a?")
    b = decision(plan, a["decision_id"], "implementation_choice", question="b?")
    c = decision(plan, b["decision_id"], "tool_invocation", question="c?")
    d = decision(plan, top["decision_id"], question="d?")
    await publish_signed(nc.jetstream(), AGENT, [top, a, b, c, d])
    ids = {"root": top["decision_id"], "a": a["decision_id"], "b": b["decision_id"],
           "c": c["decision_id"], "d": d["decision_id"]}
    await until(lambda: _count(db, plan, 5))
    return plan, ids


async def _count(db: AsyncDatabase[Document], plan: str, n: int) -> bool:
    return await db.decisions.count_documents({"plan_id": plan}) >= n


async def build_scene(nc: nats.NATS, db: AsyncDatabase[Document],
                      workers: InProcessWorkers) -> Scene:
    plan, ids = await record_plan(nc, db)
    js = nc.jetstream()
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    inv = (await svc.add_invariant(f"inv-{new_id()[-6:]}", "Never touch production")).id
    vid = new_id()
    report = {"violation_id": vid, "invariant_id": inv, "plan_id": plan,
              "severity": "warning", "details": "touched production"}
    data, h = AGENT.signed(VIOLATIONS.name, isubjects.violations(plan), vid, report)
    await js.publish(isubjects.violations(plan), data, headers=h)
    await until(lambda: db.invariant_violations.find_one({"_id": vid}))

    ops = CorrectionClient(nc, signer=ALICE.signer)
    revert = await ops.request(plan, ids["b"], "revert", "Use a token bucket")
    assert (await ended(db, revert))["status"] == "applied"
    append = await ops.request(plan, ids["d"], "append", "Mind the quota")
    done = await ended(db, append)
    assert done["status"] == "applied", done.get("error")
    await workers.stop()  # what follows is written in this process, as the CLI writes

    body = {"violation_id": vid, "resolved": True}
    who = verified(ALICE, EVENTS, isubjects.event(plan, isubjects.RESOLVED),
                   isubjects.event_msg_id(vid, isubjects.RESOLVED), body)
    await svc.resolve_violation(vid, who)
    cancelled = await request_and_cancel(nc, db, plan, ids["a"])
    return Scene(plan, done["child_plans_spawned"][0], ids, revert, append, cancelled, vid)


async def request_and_cancel(nc: nats.NATS, db: AsyncDatabase[Document], plan: str,
                             target: str) -> str:
    """A correction ALICE requests and cancels while no runner is about: PENDING, then
    CANCELLED, both signed."""
    svc = CorrectionService(CorrectionStore.open(db), JetStreamPublisher(nc),
                            Archive(ROOT / ".unused-archive", ROOT / ".unused-artifacts"))
    req = CorrectionRequest(plan_id=plan, decision_id=target, mode="revert",
                            guidance="Not this way")
    asked = verified(ALICE, REQUESTED, csubjects.requested(plan),
                     csubjects.request_msg_id(req.correction_id),
                     json.loads(req.model_dump_json()))
    await svc.request_correction(req, identity=asked)
    cancel = CancelRequest(correction_id=req.correction_id, plan_id=plan,
                           reason="changed my mind")
    told = verified(ALICE, CANCEL, csubjects.cancel(plan),
                    csubjects.cancel_msg_id(req.correction_id, cancel.reason),
                    json.loads(cancel.model_dump_json()))
    await svc.cancel_correction(req.correction_id, cancel.reason, plan_id=plan, identity=told)
    assert (await ended(db, req.correction_id))["status"] == "cancelled"
    return req.correction_id


def verifier_command(export: Path) -> list[str]:
    return [sys.executable, str(VERIFIER), str(export)]
