"""`agents invariant add --check` and `agents plan use` against the real servers and
workers: a check refused at add, a template applied and its ACTION invariant then
evaluated by the recorder, a second template and an unknown plan refused."""

from __future__ import annotations

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.reconciliation import enforced_decision_id
from contracts.shared.ids import new_id
from store.database import Document
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, assert_one_line_error, cli_workers
from tests.integration.wire import publish_all, until

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e


async def test_checks_at_add(agents: Agents) -> None:
    added = (await agents.ok(
        "invariant", "add", "no-rm", "--description", "Never rm -rf", "--check",
        '!(tool.name == "shell" && tool.arguments.cmd.contains("rm -rf"))',
        "--severity", "error", "--consequence", "hold", "--json")).json
    assert added["check"].startswith("!(tool.name") and added["consequence"] == "hold"
    assert_one_line_error(await agents("invariant", "add", "x", "--description", "d",
                                       "--check", "tool.name =="), 2, "--check",
                          "not a CEL expression")
    assert_one_line_error(await agents("invariant", "add", "x", "--description", "d",
                                       "--check", 'decison_type == "x"'), 2, "decison_type")
    assert_one_line_error(await agents("invariant", "add", "x", "--description", "d",
                                       "--check", "artifacts.exists(a, artifacts.all(b, "
                                       "a == b))"), 2, "at most 1")
    assert_one_line_error(await agents("invariant", "add", "x", "--description", "d",
                                       "--severity", "warning", "--consequence", "refuse"),
                          2, "record")
    assert (await agents.ok("invariant", "list", "--json")).json[0]["name"] == "no-rm"
    assert "error/hold check" in (await agents.ok("invariant", "list")).out


async def test_plan_use_promotes_the_templates_invariants(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    inv = (await agents.ok("invariant", "add", "no-drop", "--description", "No DROP TABLE",
                           "--action", "db-migration", "--check",
                           '!chosen_option.contains("DROP TABLE")', "--json")).json
    r = root()
    plan = r["plan_id"]
    await publish_all(js, [r])
    await until(lambda: db["decisions"].find_one({"_id": r["decision_id"]}))
    before = decision(plan, r["decision_id"], "implementation_choice",
                      chosen_option="DROP TABLE users")
    await publish_all(js, [before])
    await until(lambda: db["decisions"].find_one({"_id": before["decision_id"]}))

    used = await agents.ok("plan", "use", plan, "db-migration", "--json")
    assert used.json["status"] == "applied" and used.json["promoted"] == [inv["id"]]
    enforced = await until(lambda: db["decisions"].find_one(
        {"_id": enforced_decision_id(r["decision_id"], inv["id"])}))
    assert "agents plan use" in enforced["rationale"]
    assert enforced["parent_decision_id"] == r["decision_id"]
    again = await agents.ok("plan", "use", plan, "db-migration")
    assert "applied to plan" in again.out

    after = decision(plan, r["decision_id"], "implementation_choice",
                     chosen_option="DROP TABLE orders")
    await publish_all(js, [after])
    letter = await until(lambda: db["dead_letters"].find_one(
        {"decision_id": after["decision_id"]}))
    assert [e["rule"] for e in letter["errors"]] == ["invariant_violated"]

    assert_one_line_error(await agents("plan", "use", plan, "other-template"), 1,
                          "template_conflict", "db-migration")
    assert_one_line_error(await agents("plan", "use", new_id(), "db-migration"), 1,
                          "plan_started")
