"""Invariants through the public subjects, with the workers running as their own process:
reconciliation, violation reports, blocking and unblocking, rejected reports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.decisions.subjects import (
    DECISIONS_STREAM,
    RECONCILER_DURABLE,
    RETIRED_RECONCILER_DURABLE,
)
from contracts.invariants.model import InvariantScope
from contracts.invariants.reconciliation import enforced_decision_id
from contracts.invariants.severity import Severity
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer
from services.invariants import InvariantService
from store.database import Document
from store.invariant_store import InvariantStore
from tests.conftest import worker_env
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import drained, events, publish_all, publish_raw, until, wait_for_count
from workers.durables import retire_durables
from workers.streams import ensure_streams

pytestmark = pytest.mark.e2e

ENFORCED = {"decision_type": "invariant_enforced"}


@pytest.fixture
async def service(workers: InProcessWorkers, nc: nats.NATS,
                  db: AsyncDatabase[Document]) -> AsyncIterator[InvariantService]:
    yield InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))


def report(plan_id: str, invariant_id: str, severity: str = "error",
           **fields: Any) -> dict[str, Any]:
    return {"violation_id": new_id(), "invariant_id": invariant_id, "plan_id": plan_id,
            "decision_id": None, "severity": severity,
            "details": "deleted rows from the production users table", **fields}


async def send_report(js: Any, r: dict[str, Any]) -> None:
    await js.publish(f"invariants.violations.{r['plan_id']}", json.dumps(r).encode(),
                     headers={"Nats-Msg-Id": r["violation_id"]})



async def test_reconciliation_records_one_enforced_decision_per_effective_invariant(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    plan_id = new_id()
    g = await service.add_invariant("no-prod-deletes", "Never delete production data")
    await service.add_invariant("tests", "Tests are optional")
    p = await service.add_invariant("tests", "All API changes need tests",
                                    InvariantScope.PROJECT, "myapp")
    a = await service.add_invariant("small-prs", "PRs under 400 lines",
                                    InvariantScope.ACTION, "refactor")
    own = await service.add_invariant("no-friday", "No deploys on Friday",
                                      InvariantScope.PLAN, plan_id)
    await service.add_invariant("other", "Not this project", InvariantScope.PROJECT, "else")
    expected = {g.id, p.id, a.id, own.id}

    r = root(plan_id, project="myapp", action_template="refactor")
    await publish_all(js, [r])
    assert await wait_for_count(db, "decisions", 5, query={"plan_id": plan_id}) == 5
    enforced = [d async for d in db["decisions"].find({"plan_id": plan_id, **ENFORCED})]
    assert {d["_id"] for d in enforced} == {enforced_decision_id(r["decision_id"], i)
                                            for i in expected}
    assert all(d["parent_decision_id"] == r["decision_id"] for d in enforced)
    assert {d["chosen_option"] for d in enforced} >= {"All API changes need tests"}
    assert await db["plans"].find_one({"_id": plan_id}, {"project": 1, "action_template": 1}
                                      ) == {"_id": plan_id, "project": "myapp",
                                            "action_template": "refactor"}

    # The root's began event (what the reconciler reads) delivered twice more (as a
    # redelivery would, under message IDs JetStream has not seen): nothing new is
    # recorded or announced.
    [(_, root_event, _)] = await events(nc, f"decisions.began.{plan_id}", settle=0.3)
    assert root_event["decision_id"] == r["decision_id"]
    for n in range(2):
        await publish_raw(js, f"decisions.began.{plan_id}",
                          json.dumps(root_event).encode(), {"Nats-Msg-Id": f"again:{n}"})
    await asyncio.sleep(2.0)
    assert await db["decisions"].count_documents({"plan_id": plan_id, **ENFORCED}) == 4
    assert await db["dead_letters"].count_documents({}) == 0
    persisted = await events(nc, f"decisions.persisted.{plan_id}", settle=0.3)
    assert len([ev for _, ev, _ in persisted
                if ev["decision_type"] == "invariant_enforced"]) == 4


async def test_hostile_began_events_beside_a_valid_one_are_acked_and_its_root_reconciled(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    # Anyone's bytes on the reconciler's subject, published together with a valid began
    # event so that they reach it in one batch: garbage, nesting too deep for the
    # parser, a huge list, a date with no UTC equivalent, and a well-formed root that
    # was never stored. Each is acked; the valid root is reconciled; nothing is
    # dead-lettered and no root is invented.
    js = nc.jetstream()
    r = root()
    await publish_all(js, [r])
    [(_, body, _)] = await events(nc, f"decisions.began.{r['plan_id']}", settle=0.3)

    # Reconciled with no invariant in force: nothing recorded.
    await drained(js, DECISIONS_STREAM, RECONCILER_DURABLE)
    inv = await service.add_invariant("no-prod-deletes", "Never delete production data")
    subj = f"decisions.began.{r['plan_id']}"
    never_stored = {**body, "decision_id": new_id()}
    # Each names a root's type, so none is skipped before the parser (the reader's
    # shortcut for bodies that do not).
    batch = [b"prompt_definition, not json",
             b'{"decision_type": "prompt_definition", "x": ' + b"[" * 5000,
             json.dumps(["prompt_definition"] * 10_000).encode(),  # under the bound
             json.dumps(["prompt_definition"] * 20_000).encode(),  # over it
             json.dumps(body).encode(),
             json.dumps({**body, "created_at": "9999-12-31T23:00:00-05:00"}).encode(),
             json.dumps({**body, "sequence_number": "1e400", "parent_decision_id": [[]]}
                        ).encode(),
             json.dumps(never_stored).encode()]
    acks = [await js.publish_async(subj, data, headers={"Nats-Msg-Id": new_id()})
            for data in batch]
    await asyncio.gather(*acks)
    assert await wait_for_count(db, "decisions", 1, query=ENFORCED) == 1
    await drained(js, DECISIONS_STREAM, RECONCILER_DURABLE)
    await asyncio.sleep(0.5)
    enforced = await db.decisions.find(ENFORCED, {"_id": 1, "plan_id": 1}).to_list()
    assert enforced == [{"_id": enforced_decision_id(r["decision_id"], inv.id),
                         "plan_id": r["plan_id"]}]
    assert await db.decisions.count_documents({"_id": never_stored["decision_id"]}) == 0
    assert await db.dead_letters.count_documents({}) == 0


async def test_error_violation_blocks_execute_until_resolved_warnings_never_block(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    inv = await service.add_invariant("no-prod-deletes", "Never delete production data")
    blocked_root, warned_root = root(), root()
    blocked, warned = blocked_root["plan_id"], warned_root["plan_id"]
    await publish_all(js, [blocked_root, warned_root])
    await wait_for_count(db, "decisions", 4)  # two roots, one invariant_enforced each

    error = report(blocked, inv.id, "error", decision_id=blocked_root["decision_id"])
    await send_report(js, error)
    for sev in ("warning", "info"):
        await send_report(js, report(warned, inv.id, sev))
    violated = await until(lambda: _events(nc, "invariants.events.*.violated", 3))
    by_plan = {ev["violation"]["plan_id"]: ev for _, ev, _ in violated
               if ev["violation"]["severity"] == "error"}
    assert by_plan[blocked]["event_type"] == "INVARIANT_VIOLATED"
    assert by_plan[blocked]["plan_blocked"] is True
    assert by_plan[blocked]["invariant_name"] == "no-prod-deletes"
    assert await service.blocked_plans([blocked, warned]) == {blocked}

    execute = decision(blocked, blocked_root["decision_id"], "implementation_choice")
    strategize = decision(blocked, blocked_root["decision_id"], "strategy_choice")
    warned_execute = decision(warned, warned_root["decision_id"], "tool_invocation")
    await publish_all(js, [execute, strategize, warned_execute])
    letter = await until(lambda: db["dead_letters"].find_one(
        {"decision_id": execute["decision_id"]}))
    assert [e["rule"] for e in letter["errors"]] == ["reconciliation_blocked"]
    assert error["violation_id"] in letter["errors"][0]["message"]
    rejected = await events(nc, f"decisions.rejected.{blocked}", settle=0.3)
    assert [ev["errors"][0]["rule"] for _, ev, _ in rejected] == ["reconciliation_blocked"]
    await wait_for_count(db, "decisions", 2, query={"_id": {"$in": [
        strategize["decision_id"], warned_execute["decision_id"]]}})

    done = await service.resolve_violation(error["violation_id"])
    assert done.resolved_by is None and done.resolved_at is not None  # unsigned: unverified
    resolved = await until(lambda: _events(nc, "invariants.events.*.resolved", 1))
    (subj, ev, hdrs), = resolved
    assert subj == f"invariants.events.{blocked}.resolved"
    assert ev["plan_blocked"] is False
    assert hdrs["Nats-Msg-Id"] == f"violation:{error['violation_id']}:resolved"

    later = decision(blocked, blocked_root["decision_id"], "implementation_choice")
    await publish_all(js, [later])
    assert await wait_for_count(db, "decisions", 1,
                                query={"_id": later["decision_id"]}) == 1
    assert await db["dead_letters"].count_documents({}) == 1


async def _events(nc: nats.NATS, subject: str, at_least: int) -> list[Any] | None:
    found = await events(nc, subject, settle=0.2)
    return found if len(found) >= at_least else None


async def test_invalid_violation_reports_are_dead_lettered_and_reported(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    inv = await service.add_invariant("no-prod-deletes", "Never delete production data")
    plan_id = new_id()
    good = report(plan_id, inv.id, "warning")
    unknown = report(plan_id, new_id())
    wrong_id = report(plan_id, inv.id)
    conflict = {**good, "details": "something else"}
    await publish_raw(js, f"invariants.violations.{plan_id}", b"{not json",
                      {"Nats-Msg-Id": new_id()})
    await send_report(js, unknown)
    await js.publish(f"invariants.violations.{plan_id}", json.dumps(wrong_id).encode(),
                     headers={"Nats-Msg-Id": new_id()})
    await send_report(js, good)
    await send_report(js, report(plan_id, inv.id, "fatal"))
    # The same violation_id with other content, past JetStream's duplicate window.
    await js.publish(f"invariants.violations.{plan_id}", json.dumps(conflict).encode(),
                     headers={"Nats-Msg-Id": good["violation_id"].lower()})

    assert await wait_for_count(db, "dead_letters", 5, timeout=20) == 5
    letters = [d async for d in db["dead_letters"].find()]
    assert sorted(d["errors"][0]["rule"] for d in letters) == sorted(
        ["not_json", "invariant_exists", "msg_id_matches_violation", "schema",
         "violation_id_conflict"])
    assert all(d["_id"].startswith("INVARIANTS:") for d in letters)
    rejected = await until(lambda: _events(nc, "invariants.rejected.>", 5))
    assert {s for s, _, _ in rejected} == {f"invariants.rejected.{plan_id}"}
    stored = await service.list_violations(plan_id)
    assert [v.violation_id for v in stored] == [good["violation_id"]]
    assert stored[0].severity is Severity.WARNING
    assert await service.blocked_plans([plan_id]) == set()


async def test_the_reconciler_durable_of_the_version_before_is_retired_at_start(
        nats_server: ManagedServer, mongo_uri: str, nc: nats.NATS,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    # The version before read every decisions.persisted.* through the durable
    # `reconciler`. The workers delete it when they start (nothing reads it any more),
    # and reconcile new roots from their began events through `plan-reconciler`.
    js = nc.jetstream()
    await ensure_streams(js)
    await js.add_consumer(DECISIONS_STREAM, ConsumerConfig(
        durable_name=RETIRED_RECONCILER_DURABLE, filter_subject="decisions.persisted.*",
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW))
    service = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    inv = await service.add_invariant("no-prod-deletes", "Never delete production data")
    w = InProcessWorkers(worker_env(nats_server.url, mongo_uri, db_name),
                         tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        names = {c.name for c in await js.consumers_info(DECISIONS_STREAM)}
        assert RETIRED_RECONCILER_DURABLE not in names and RECONCILER_DURABLE in names
        info = await js.consumer_info(DECISIONS_STREAM, RECONCILER_DURABLE)
        assert info.config.filter_subject == "decisions.began.*"
        r = root()
        await publish_all(js, [r])
        assert await wait_for_count(db, "decisions", 1, query=ENFORCED) == 1
        assert await db.decisions.find_one(ENFORCED, {"_id": 1}) == {
            "_id": enforced_decision_id(r["decision_id"], inv.id)}
    finally:
        await w.stop()
    assert "consumer reconciler on DECISIONS retired" in (tmp_path / "workers.log").read_text()


async def test_two_replicas_starting_together_both_retire_the_old_durable_without_error(
        nats_server: ManagedServer, nc: nats.NATS) -> None:
    js = nc.jetstream()
    await ensure_streams(js)
    await js.add_consumer(DECISIONS_STREAM, ConsumerConfig(
        durable_name=RETIRED_RECONCILER_DURABLE, filter_subject="decisions.persisted.*",
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW))
    other = await nats.connect(nats_server.url)
    try:
        await asyncio.gather(retire_durables(js), retire_durables(other.jetstream()))
    finally:
        await other.close()
    names = {c.name for c in await js.consumers_info(DECISIONS_STREAM)}
    assert RETIRED_RECONCILER_DURABLE not in names
