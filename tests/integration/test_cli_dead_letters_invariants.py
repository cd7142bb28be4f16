"""`agents dead-letters ...` and `agents invariant ...` against the real servers and workers."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule, RuleViolation
from store.database import Document
from store.dead_letters import DeadLetterRepository
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import (
    Agents,
    agents,
    assert_one_line_error,
    cli_workers,
    seed_plan,
)
from tests.integration.wire import wait_for_count

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e


async def test_dead_letters(cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
                            db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    plan_id = new_id()
    binary = b"\xff\xfe not json"
    await js.publish(f"decisions.recorded.{plan_id}", binary, headers={"Nats-Msg-Id": new_id()})
    await js.publish(f"decisions.recorded.{plan_id}", json.dumps({"plan_id": plan_id}).encode())
    assert await wait_for_count(db, "dead_letters", 2, timeout=30) == 2

    listed = (await agents.ok("dead-letters", "list", "--plan", plan_id, "--json")).json
    assert len(listed) == 2
    by_encoding = {d["payload_encoding"]: d for d in listed}
    assert base64.b64decode(by_encoding["base64"]["payload"]) == binary
    assert json.loads(by_encoding["utf-8"]["payload"]) == {"plan_id": plan_id}
    text = (await agents.ok("dead-letters", "list")).out
    assert "DECISIONS:" in text and f"decisions.recorded.{plan_id}" in text

    bad_id, text_id = by_encoding["base64"]["id"], by_encoding["utf-8"]["id"]
    assert (await agents.ok("dead-letters", "show", bad_id, "--json")).json["id"] == bad_id
    shown = (await agents.ok("dead-letters", "show", bad_id)).out
    assert "not UTF-8" in shown and "fffe" in shown.replace(" ", "")
    assert '"plan_id"' in (await agents.ok("dead-letters", "show", text_id)).out

    # A rule that judges the bytes refuses the same bytes again: nothing is republished.
    assert_one_line_error(await agents("dead-letters", "retry", bad_id), 1,
                          "rule not_utf8 would refuse them again", "discard it")
    assert await db.dead_letters.count_documents({"_id": bad_id}) == 1
    # Retryable (every delivery failed) but within the DECISIONS duplicate window of its
    # Nats-Msg-Id: dropped, kept, and the refusal says when to try again.
    msg_id = new_id()
    await js.publish(f"decisions.recorded.{plan_id}", b"{}", headers={"Nats-Msg-Id": msg_id})
    windowed = DeadLetter.of_message(
        id="DECISIONS:777777", subject=f"decisions.recorded.{plan_id}",
        headers={"Nats-Msg-Id": msg_id}, data=b"{}", plan_id=plan_id, decision_id=None,
        rejected_at=datetime.now(UTC), delivered=5,
        errors=[RuleViolation(rule=Rule.MAX_DELIVERIES, message="MongoDB did not answer")])
    await DeadLetterRepository(db).keep([windowed])
    assert_one_line_error(await agents("dead-letters", "retry", windowed.id), 1,
                          "dropped the retry as a duplicate", f"{windowed.id} is kept",
                          "retry it in")
    # No Msg-Id: republished, rejected again as a new stream message, the old one deleted.
    flaky = DeadLetter.of_message(
        id="DECISIONS:777778", subject=f"decisions.recorded.{plan_id}", headers={},
        data=json.dumps({"plan_id": plan_id}).encode(), plan_id=plan_id, decision_id=None,
        rejected_at=datetime.now(UTC), delivered=5,
        errors=[RuleViolation(rule=Rule.MAX_DELIVERIES, message="MongoDB did not answer")])
    await DeadLetterRepository(db).keep([flaky])
    retried = (await agents.ok("dead-letters", "retry", flaky.id, "--json")).json
    assert retried["deleted"] and retried["stream"] == "DECISIONS"
    again = f"DECISIONS:{retried['stream_sequence']}"
    assert await wait_for_count(db, "dead_letters", 1, timeout=30, query={"_id": again}) == 1
    assert await db.dead_letters.count_documents({"_id": flaky.id}) == 0
    assert text_id
    assert_one_line_error(await agents("dead-letters", "show", "DECISIONS:999999"), 1,
                          "no dead letter DECISIONS:999999")
    assert_one_line_error(await agents("dead-letters", "retry", "DECISIONS:999999"), 1,
                          "no dead letter DECISIONS:999999")
    # A subject no stream takes (a stream's subjects narrowed since): not stored, kept.
    stray = DeadLetter.of_message(
        id="DECISIONS:888888", subject=f"nowhere.{plan_id}", headers={}, data=b"{}",
        plan_id=plan_id, decision_id=None, rejected_at=datetime.now(UTC), delivered=1,
        errors=[RuleViolation(rule=Rule.MAX_DELIVERIES, message="a server was down")])
    await DeadLetterRepository(db).keep([stray])
    assert_one_line_error(await agents("dead-letters", "retry", stray.id), 1,
                          "was not stored", f"no stream takes subject nowhere.{plan_id}",
                          f"{stray.id} is kept")
    assert await db.dead_letters.count_documents({"_id": stray.id}) == 1


async def test_invariants(cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
                          db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=2)
    plan_id = tree[0]["plan_id"]
    glob = (await agents.ok("invariant", "add", "no-prod-deletes", "--description",
                            "Never delete production data", "--json")).json
    assert glob["scope"] == "GLOBAL" and glob["scope_target"] is None
    proj = (await agents.ok("invariant", "add", "no-prod-deletes", "--description",
                            "Ask first", "--project", "myapp", "--json")).json
    out = (await agents.ok("invariant", "add", "tests-pass", "--description", "Run tests",
                           "--plan", plan_id.lower())).out
    assert "added: tests-pass (PLAN " + plan_id in out
    assert_one_line_error(await agents("invariant", "add", "x", "--description", "d",
                                       "--project", "p", "--plan", plan_id), 2,
                          "give at most one of --project, --plan and --action")
    assert_one_line_error(await agents("invariant", "add", "no-prod-deletes", "--description",
                                       "again"), 1, "no-prod-deletes")

    everything = (await agents.ok("invariant", "list", "--json")).json
    assert len(everything) == 3
    effective = (await agents.ok("invariant", "list", "--effective", "--project", "myapp",
                                 "--json")).json
    assert [i["id"] for i in effective] == [proj["id"]]
    for_plan = (await agents.ok("invariant", "list", "--effective", "--plan", plan_id,
                                "--json")).json
    assert sorted(i["name"] for i in for_plan) == ["no-prod-deletes", "tests-pass"]
    text = (await agents.ok("invariant", "list")).out
    assert "no-prod-deletes" in text and "PROJECT" in text and "myapp" in text
    assert_one_line_error(await agents("invariant", "list", "--project", "myapp"), 2,
                          "go with --effective")

    removed = (await agents.ok("invariant", "remove", proj["id"], "--json")).json
    assert removed["id"] == proj["id"]
    assert_one_line_error(await agents("invariant", "remove", proj["id"]), 1, proj["id"])

    violation_id = new_id()
    report = {"violation_id": violation_id, "invariant_id": glob["id"], "plan_id": plan_id,
              "severity": "error", "details": "dropped a table"}
    await nc.jetstream().publish(f"invariants.violations.{plan_id}", json.dumps(report).encode(),
                                 headers={"Nats-Msg-Id": violation_id})
    assert await wait_for_count(db, "invariant_violations", 1, timeout=30) == 1
    [open_] = (await agents.ok("invariant", "violations", "--plan", plan_id, "--unresolved",
                               "--json")).json
    assert open_["violation_id"] == violation_id and open_["resolved_at"] is None
    assert "blocking" in (await agents.ok("invariant", "violations")).out
    done = (await agents.ok("invariant", "resolve", violation_id, "--by", "alice",
                            "--json")).json
    assert done["resolved_by"] is None  # no seed signed it: nobody verified
    assert (await agents.ok("invariant", "violations", "--unresolved", "--json")).json == []
    assert_one_line_error(await agents("invariant", "resolve", violation_id), 1, "resolved")
    assert_one_line_error(await agents("invariant", "resolve", new_id()), 1, "not found")
