"""Verified identity and plan ownership with the workers running as their own process:
every way a message's sender is refused has its named rule in the dead letters, hostile
signature headers hold back no valid message, and what is recorded names only the
principals the ledger verified."""

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
from contracts.corrections import subjects as csubjects
from contracts.corrections.families import CANCEL, DRYRUN, REQUESTED
from contracts.invariants import subjects as isubjects
from contracts.invariants.families import VIOLATIONS
from contracts.recording.families import COMMENT, END_PLAN, RECORDED
from contracts.shared.ids import new_id
from contracts.shared.partitions import partition_of
from contracts.shared.roles import Role
from deploy.embedded import ManagedServer
from services.invariants import InvariantService
from services.read_model import explain
from store.database import Document
from store.invariant_store import InvariantStore
from store.mongo_store import MongoStore
from tests.conftest import worker_env
from tests.factories import decision, encode, root, subject
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import until, wait_for_count
from tests.trust_support import Member, ago, member, write_principals, write_seed
from workers.lane import AHEAD, WRITING

pytestmark = pytest.mark.e2e

AGENT = member("billing-agent", Role.AGENT)
OTHER = member("other-agent", Role.AGENT)
REVOKED = member("old-agent", Role.AGENT)
STRANGER = member("stranger", Role.AGENT)  # not in the principals file
ALICE = member("alice", Role.OPERATOR, "billing")
BOB = member("bob", Role.OPERATOR, "other")
WORKER = member("ledger-worker", Role.WORKER)


async def _workers(nats_server: ManagedServer, mongo_uri: str, db_name: str, tmp_path: Path,
                   **extra: str) -> InProcessWorkers:
    principals = write_principals(tmp_path / "principals.toml", AGENT, OTHER, REVOKED, ALICE,
                                  BOB, WORKER, revoked={REVOKED.name: ago(3600)})
    env = worker_env(nats_server.url, mongo_uri, db_name, LEDGER_PRINCIPALS=str(principals),
                     NATS_NKEY_SEED=str(write_seed(tmp_path / "worker.seed", WORKER)),
                     CORRECTIONS_RETRY_DELAY="0.2", **extra)
    w = InProcessWorkers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    return w


@pytest.fixture
async def signed_workers(nats_server: ManagedServer, mongo_uri: str,
                         db: AsyncDatabase[Document], db_name: str,
                         tmp_path: Path) -> AsyncIterator[InProcessWorkers]:
    w = await _workers(nats_server, mongo_uri, db_name, tmp_path)
    try:
        yield w
    finally:
        await w.stop()


def signed(who: Member, d: dict[str, Any]) -> tuple[str, bytes, dict[str, str]]:
    data, headers = who.signed(RECORDED.name, subject(d), d["decision_id"], d)
    return subject(d), data, headers


async def billing_root(nc: nats.NATS, db: AsyncDatabase[Document]) -> dict[str, Any]:
    """A plan of project billing whose root AGENT signed, once it is recorded."""
    top = root(project="billing")
    s, data, h = signed(AGENT, top)
    await nc.jetstream().publish(s, data, headers=h)
    await wait_for_count(db, "decisions", 1, query={"_id": top["decision_id"]})
    return top


async def rules_of(db: AsyncDatabase[Document], ids: list[str]) -> dict[str, list[str]]:
    """decision_id -> the rules its dead letter names (the slot is None if none yet)."""
    # A message refused before it was read (its signature) is known by its Nats-Msg-Id.
    found = {d.get("decision_id") or d["headers"].get("Nats-Msg-Id"):
             [e["rule"] for e in d["errors"]]
             async for d in db.dead_letters.find({"$or": [
                 {"decision_id": {"$in": ids}}, {"headers.Nats-Msg-Id": {"$in": ids}}]})}
    return found


async def test_every_refusal_is_named_and_only_verified_principals_are_recorded(
        signed_workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    top = root(project="billing", created_at=ago(30).isoformat())
    plan = top["plan_id"]
    child = decision(plan, top["decision_id"])
    expect: dict[str, str] = {}   # decision_id -> the rule its dead letter names
    msgs: list[tuple[str, bytes, dict[str, str]]] = [signed(AGENT, top), signed(AGENT, child)]

    def refused(rule: str, who: Member | None, d: dict[str, Any],
                change: dict[str, Any] | None = None, **headers: str) -> None:
        s, data, h = signed(who, d) if who else (subject(d), encode(d),
                                                  {"Nats-Msg-Id": d["decision_id"]})
        if change:
            data = json.dumps({**json.loads(data), **change}).encode()
        msgs.append((s, data, {**h, **headers}))
        expect[d["decision_id"]] = rule

    refused("plan_owner", None, decision(plan, top["decision_id"]))  # unsigned, owned plan
    refused("plan_owner", OTHER, decision(plan, top["decision_id"]))
    refused("unknown_key", STRANGER, decision(plan, top["decision_id"]))
    refused("key_revoked", REVOKED, decision(plan, top["decision_id"]))
    refused("bad_signature", AGENT, decision(plan, top["decision_id"]),
            **{"Ledger-Key": OTHER.public})  # replayed under another principal's key
    refused("bad_signature", AGENT, decision(plan, top["decision_id"]),
            change={"chosen_option": "Something else"})  # a flipped field
    moved = decision(plan, top["decision_id"])
    _, data, h = signed(AGENT, moved)
    msgs.append((f"decisions.recorded.{new_id()}", data, h))  # sent on another subject
    expect[moved["decision_id"]] = "bad_signature"
    refused("created_at_skew", AGENT, decision(plan, top["decision_id"],
                                               created_at=ago(3600).isoformat()))
    refused("created_at_skew", AGENT, decision(plan, top["decision_id"],
                                               created_at=ago(-3600).isoformat()))
    refused("created_before_parent", AGENT, decision(
        plan, child["decision_id"], created_at=ago(120).isoformat()))
    # Adopting a foreign plan: a claim the tree rules allow (made before it began).
    refused("plan_owner", OTHER, root(downstream_plan_ids=[plan],
                                      created_at=ago(60).isoformat()))
    refused("plan_owner", OTHER, root(parent_plan_id=plan))
    for garbage in ({"Ledger-Key": "U" * 60_000}, {"Ledger-Sig": "%%%" * 30},
                    {"Ledger-Salt": "A" * 23}, {"Ledger-Signed-At": "now"}):
        refused("bad_signature", AGENT, decision(plan, top["decision_id"]), **garbage)
    other_plan = root()  # unsigned in development: recorded, unverified, owned by no one
    msgs.append((subject(other_plan), encode(other_plan),
                 {"Nats-Msg-Id": other_plan["decision_id"]}))
    acks = [await js.publish_async(s, data, headers=h) for s, data, h in msgs]
    for a in acks:
        await a

    stored = await until(lambda: _all_there(db, [top, child, other_plan]))
    got = await until(lambda: _complete(db, list(expect)))
    assert got == {k: [v] for k, v in expect.items()}
    by_id = {d["_id"]: d for d in stored}
    mine = by_id[top["decision_id"]]
    assert mine["recorded_by"] == AGENT.name and mine["verified"] is True
    assert mine["signature"]["key"] == AGENT.public
    assert set(mine["signature"]["fields"]) == set(top)
    unverified = by_id[other_plan["decision_id"]]
    assert unverified["recorded_by"] is None and unverified["verified"] is False
    assert unverified["signature"] is None
    owner = await db.plans.find_one({"_id": plan})
    assert owner is not None and owner["owner"] == AGENT.name
    # What explain (the CLI, the console) shows as who recorded it.
    reads = MongoStore(db)
    assert (await explain(reads, top["decision_id"])).recorded_by == AGENT.name  # type: ignore[union-attr]
    assert (await explain(reads, other_plan["decision_id"])).recorded_by is None  # type: ignore[union-attr]
    # Nothing stored names a principal the ledger did not verify.
    names = {d.get("recorded_by") async for d in db.decisions.find({})}
    assert names <= {AGENT.name, WORKER.name, None}


async def _all_there(db: AsyncDatabase[Document], ds: list[dict[str, Any]]) -> list[Document]:
    found = await db.decisions.find({"_id": {"$in": [d["decision_id"] for d in ds]}}).to_list()
    return found if len(found) == len(ds) else []


async def _complete(db: AsyncDatabase[Document], ids: list[str]) -> dict[str, list[str]]:
    got = await rules_of(db, ids)
    return got if len(got) == len(ids) else {}


async def test_reports_and_operators_are_held_to_ownership_and_scope(
        signed_workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    top = await billing_root(nc, db)
    plan = top["plan_id"]
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    inv = (await svc.add_invariant("no-prod", "Never touch production")).id
    reports = {}
    for who in (AGENT, OTHER):
        vid = new_id()
        body = {"violation_id": vid, "invariant_id": inv, "plan_id": plan,
                "severity": "error", "details": f"by {who.name}"}
        data, h = who.signed(VIOLATIONS.name, isubjects.violations(plan), vid, body)
        await js.publish(isubjects.violations(plan), data, headers=h)
        reports[who.name] = vid
    await until(lambda: db.invariant_violations.find_one({"_id": reports[AGENT.name]}))
    stored = await db.invariant_violations.find_one({"_id": reports[AGENT.name]})
    assert stored is not None and stored["reported_by"] == AGENT.name
    letter = await until(lambda: db.dead_letters.find_one(
        {"subject": isubjects.violations(plan), "errors.rule": "plan_owner"}))
    assert letter is not None
    assert await db.invariant_violations.find_one({"_id": reports[OTHER.name]}) is None

    corrections = {}
    for who in (BOB, ALICE):
        cid = new_id()
        body = {"correction_id": cid, "plan_id": plan, "decision_id": top["decision_id"],
                "mode": "append", "guidance": "Mind the quota", "requested_by": "someone"}
        data, h = who.signed(REQUESTED.name, csubjects.requested(plan), cid, body)
        await js.publish(csubjects.requested(plan), data, headers=h)
        corrections[who.name] = cid
    done = await until(lambda: db.corrections.find_one({"_id": corrections[ALICE.name]}))
    assert done["requested_by"] == ALICE.name and done["claimed_by"] == "someone"
    assert done["verified"] is True and done["signature"]["principal"] == ALICE.name
    refusal = await until(lambda: db.dead_letters.find_one(
        {"subject": csubjects.requested(plan), "errors.rule": "operator_scope"}))
    assert refusal is not None
    assert await db.corrections.find_one({"_id": corrections[BOB.name]}) is None


async def test_production_setting_refuses_unsigned_messages(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path, nc: nats.NATS) -> None:
    w = await _workers(nats_server, mongo_uri, db_name, tmp_path, REQUIRE_SIGNATURES="1")
    try:
        js = nc.jetstream()
        unsigned, ok = root(), root()
        await js.publish(subject(unsigned), encode(unsigned),
                         headers={"Nats-Msg-Id": unsigned["decision_id"]})
        s, data, h = signed(AGENT, ok)
        await js.publish(s, data, headers=h)
        got = await until(lambda: _complete(db, [unsigned["decision_id"]]))
        assert got == {unsigned["decision_id"]: ["unsigned"]}
        assert await until(lambda: _all_there(db, [ok]))
    finally:
        await w.stop()


async def test_partitioned_recording_verifies_the_subject_the_agent_signed(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path, nc: nats.NATS) -> None:
    """The stream stores a partitioned recording under `decisions.recorded.<k>.<plan>`;
    the signature covers the subject published to, and that is the one checked."""
    w = await _workers(nats_server, mongo_uri, db_name, tmp_path, REQUIRE_SIGNATURES="1",
                       RECORDER_PARTITIONS="3")
    try:
        js = nc.jetstream()
        tops = [root(project="billing") for _ in range(12)]  # over every partition
        for top in tops:
            s, data, h = signed(AGENT, top)
            await js.publish(s, data, headers=h)
        assert await until(lambda: _all_there(db, tops))
        assert await db.dead_letters.count_documents({}) == 0
        stored = await db.decisions.find_one({"_id": tops[0]["decision_id"]})
        assert stored is not None and stored["recorded_by"] == AGENT.name
    finally:
        await w.stop()


async def test_comments_and_plan_endings_name_their_verified_sender_and_respect_ownership(
        signed_workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    top = await billing_root(nc, db)
    plan = top["plan_id"]

    async def send(who: Member, family: str, subj: str, msg_id: str,
                   body: dict[str, Any]) -> None:
        data, h = who.signed(family, subj, msg_id, body)
        await js.publish(subj, data, headers=h)

    comments = {}
    for who in (OTHER, ALICE, AGENT):  # a foreign agent's comment is refused
        cid = new_id()
        comments[who.name] = cid
        await send(who, COMMENT.name, COMMENT.subject_for(plan), cid,
                   {"comment_id": cid, "plan_id": plan, "decision_id": top["decision_id"],
                    "text": f"from {who.name}"})
    await send(OTHER, END_PLAN.name, END_PLAN.subject_for(plan), f"end_plan:{plan}:abandoned",
               {"plan_id": plan, "status": "abandoned"})
    await send(AGENT, END_PLAN.name, END_PLAN.subject_for(plan), f"end_plan:{plan}:completed",
               {"plan_id": plan, "status": "completed", "reason": "done"})

    ended = await until(lambda: db.plans.find_one({"_id": plan, "status": "completed"}))
    assert ended["ended_by"] == AGENT.name  # the foreign abandon came first and was refused
    await until(lambda: db.comments.find_one({"_id": comments[AGENT.name]}))
    authors = {c["_id"]: c["author"] async for c in db.comments.find({"plan_id": plan})}
    assert authors == {comments[ALICE.name]: ALICE.name, comments[AGENT.name]: AGENT.name}


async def test_a_dry_run_is_answered_to_verified_operators_within_their_projects(
        signed_workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    top = await billing_root(nc, db)
    plan = top["plan_id"]

    async def ask(who: Member | None, **extra: str) -> dict[str, Any]:
        cid = new_id()
        body = {"correction_id": cid, "plan_id": plan, "decision_id": top["decision_id"],
                "mode": "revert"}
        subj = csubjects.dryrun(plan)
        data, h = who.signed(DRYRUN.name, subj, cid, body) if who else \
            (json.dumps(body).encode(), {})
        reply = await nc.request(subj, data, timeout=30, headers={**h, **extra})
        answer: dict[str, Any] = json.loads(reply.data)
        return answer

    assert "impact" in await ask(ALICE)
    assert (await ask(BOB))["error"] == "operator_scope"
    assert (await ask(STRANGER))["error"] == "unknown_key"
    assert (await ask(ALICE, **{"Ledger-Key": BOB.public}))["error"] == "bad_signature"
    assert "impact" in await ask(None)  # unsigned: accepted where not required


async def test_a_cancel_queued_with_its_request_is_held_to_its_sender(
        signed_workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    """Requests and cancels stored while no worker runs: each cancel applied as its
    request is recorded names the operator the ledger verified; one from an operator
    outside the plan's projects, an agent's, and hostile ones (not JSON, deep nesting,
    a flipped field, garbage signature headers) are not applied there: their own
    consumer dead-letters each with its rule."""
    js = nc.jetstream()
    top = await billing_root(nc, db)
    plan = top["plan_id"]
    await signed_workers.stop()

    async def send(who: Member, family: str, subj: str, msg_id: str,
                   body: dict[str, Any]) -> None:
        data, h = who.signed(family, subj, msg_id, body)
        await js.publish(subj, data, headers=h)

    async def cancel_of(cid: str, data: bytes, headers: dict[str, str]) -> None:
        await js.publish(csubjects.cancel(plan), data,
                         headers={**headers, "Nats-Msg-Id": f"cancel:{cid}:{new_id()}"})

    asked = {}
    for canceller in (ALICE, BOB, AGENT):
        cid = asked[canceller.name] = new_id()
        await send(ALICE, REQUESTED.name, csubjects.requested(plan), cid,
                   {"correction_id": cid, "plan_id": plan, "mode": "append",
                    "decision_id": top["decision_id"], "guidance": "Mind the quota"})
        body = {"correction_id": cid, "plan_id": plan, "reason": "asked too early"}
        if canceller is AGENT:
            # Before the agent's own cancel (wrong_role), hostile ones for the same
            # correction: not JSON, deeply nested, a flipped field under Alice's
            # signature, garbage signature headers. None may stop it.
            await cancel_of(cid, b"\xff\x00 not json", {})
            await cancel_of(cid, b"[" * 5000 + b"]" * 5000, {})
            data, h = ALICE.signed(CANCEL.name, csubjects.cancel(plan), f"cancel:{cid}", body)
            await cancel_of(cid, data.replace(b"asked too early", b"asked much too early"),
                            h)
            await cancel_of(cid, json.dumps(body).encode(),
                            {"Ledger-Key": "U" * 60_000, "Ledger-Sig": "%%%"})
        await send(canceller, CANCEL.name, csubjects.cancel(plan), f"cancel:{cid}", body)
    await signed_workers.start(signed_workers.env["NATS_URL"])

    cancelled = await until(lambda: db.corrections.find_one(
        {"_id": asked[ALICE.name], "status": "cancelled"}), timeout=30)
    last = cancelled["history"][-1]
    assert (last["to_status"], last["by"]) == ("cancelled", ALICE.name)
    assert last["signature"]["principal"] == ALICE.name
    for who in (BOB, AGENT):
        ran = await until(lambda who=who: db.corrections.find_one(
            {"_id": asked[who.name], "status": "applied"}), timeout=30)
        assert all(t["to_status"] != "cancelled" for t in ran["history"])
    for rule in ("operator_scope", "wrong_role", "bad_signature"):
        assert await until(lambda rule=rule: db.dead_letters.find_one(
            {"subject": csubjects.cancel(plan), "errors.rule": rule}))


async def test_an_agent_flooding_its_plan_does_not_hold_back_another_agents_decision(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path, nc: nats.NATS) -> None:
    """What an agent's own credentials allow against another team's agent: flood its own
    plan. The worker's partitions share a lane and its loops take turns by the clock
    (workers.lane, services.turns), so another agent's plan root in another partition
    is recorded within a few of the flood's batches, not behind the whole flood; and
    nothing of the flood is lost."""
    batch = 100
    w = await _workers(nats_server, mongo_uri, db_name, tmp_path, REQUIRE_SIGNATURES="1",
                       RECORDER_PARTITIONS="2", RECORDER_BATCH_SIZE=str(batch))
    try:
        js = nc.jetstream()
        top = await billing_root(nc, db)
        flood = [decision(top["plan_id"], top["decision_id"], question=f"Flood {i}?")
                 for i in range(1_000)]
        theirs = root()
        while partition_of(theirs["plan_id"], 2) == partition_of(top["plan_id"], 2):
            theirs = root()
        sent = [signed(AGENT, d) for d in flood]
        lone = signed(OTHER, theirs)
        acks = [await js.publish_async(s, data, headers=h) for s, data, h in sent]
        await asyncio.gather(*acks)
        before = await db.decisions.count_documents({"plan_id": top["plan_id"]})
        await js.publish(lone[0], lone[1], headers=lone[2])
        assert await until(lambda: _all_there(db, [theirs]), 60.0)
        at = await db.decisions.count_documents({"plan_id": top["plan_id"]})
        assert await until(lambda: _all_there(db, flood), 120.0)
        assert await db.dead_letters.count_documents({}) == 0
        stored = await db.decisions.find_one({"_id": theirs["decision_id"]})
        assert stored is not None and stored["recorded_by"] == OTHER.name
        # Behind at most the flood's batches begun or being written in the lane (AHEAD +
        # WRITING), the one that asked for room before it, and the pull it was in.
        assert at - before <= (AHEAD + WRITING + 2) * batch, (before, at)
    finally:
        await w.stop()
