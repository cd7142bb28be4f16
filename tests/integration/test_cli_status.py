"""`agents status` against the real servers and workers: what needs attention, and the
exit code a script alerts on."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from cli.status import EXIT_ATTENTION
from contracts.shared.ids import new_id
from store.database import Document
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, cli_workers, seed_plan
from tests.integration.wire import wait_for_count

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e


async def test_status_of_a_healthy_stack_then_of_one_needing_attention(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=4)
    plan_id = tree[0]["plan_id"]
    healthy = await agents.ok("status", "--json")
    shown = healthy.json
    assert [w["alive"] for w in shown["workers"]] == [True]
    decisions = next(s for s in shown["streams"] if s["name"] == "DECISIONS")
    recorder = next(c for c in decisions["consumers"] if c["name"] == "recorder")
    assert recorder["pending"] == 0 and decisions["messages"] >= 4
    assert shown["dead_letters"] == 0 and shown["attention"] == []

    # A dead letter, an open error violation, a correction held PENDING by another owner.
    js = nc.jetstream()
    await js.publish(f"decisions.recorded.{plan_id}", b"not json")
    await db.plan_locks.insert_one({"_id": plan_id, "owner": "test",
                                    "expires_at": datetime.now(UTC) + timedelta(hours=1)})
    await agents.ok("plan", "correct", "--mode", "revert", tree[1]["decision_id"])
    invariant = (await agents.ok("invariant", "add", "no-prod-writes", "--description",
                                 "Never write to production", "--json")).json
    await js.publish(f"invariants.violations.{plan_id}", json.dumps({
        "violation_id": (vid := new_id()), "invariant_id": invariant["id"],
        "plan_id": plan_id, "decision_id": None, "severity": "error",
        "details": "wrote to production"}).encode(), headers={"Nats-Msg-Id": vid})
    assert await wait_for_count(db, "dead_letters", 1, timeout=30) >= 1
    assert await wait_for_count(db, "corrections", 1, timeout=30) == 1
    assert await wait_for_count(db, "invariant_violations", 1, timeout=30) == 1

    r = await agents("status", "--json")
    assert r.code == EXIT_ATTENTION, (r.out, r.err)
    shown = r.json
    assert shown["dead_letters"] == 1 and shown["dead_letters_by_rule"] == {"not_json": 1}
    assert shown["violations_open"] == {"error": 1}
    assert shown["corrections_in_flight"] == {"pending": 1}
    assert shown["oldest_in_flight_at"] is not None
    assert [a.split(" (")[0] for a in shown["attention"]] == [
        "1 dead letter(s)", "1 open error violation(s) block Execute-phase decisions"]
    text = await agents("status")
    assert text.code == EXIT_ATTENTION
    for line in ("workers: 1 alive", "streams and consumers", "recorder",
                 "corrections in flight: 1 pending", "dead letters: 1 (1 not_json)",
                 "open violations: 1 error", "attention:"):
        assert line in text.out, (line, text.out)
