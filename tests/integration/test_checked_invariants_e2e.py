"""Checked invariants through the public subjects, with the workers as their own process:
a check that passes and one that fails, each severity and consequence, each scope and
its precedence, evaluation errors, an invariant added while agents record, and an
agent's client naming its tool, told of the refusal, and told that a decision is held."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from clients.recorder import DecisionRecorder
from clients.recording_errors import DecisionRejectedError
from contracts.decisions.tools import ToolCall
from contracts.invariants.model import InvariantScope
from contracts.invariants.severity import Consequence, Severity
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule
from deploy.embedded import ManagedServer
from services.invariants import InvariantService
from store.database import Document
from store.invariant_store import InvariantStore
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents  # noqa: F401  # the fixture
from tests.integration.wire import events, publish_all, until

pytestmark = pytest.mark.e2e

NO_RM = '!(tool.name == "shell" && tool.arguments.cmd.contains("rm -rf"))'


@pytest.fixture
async def service(workers: InProcessWorkers, nc: nats.NATS,
                  db: AsyncDatabase[Document]) -> AsyncIterator[InvariantService]:
    yield InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))


def shell(plan_id: str, parent: str, cmd: str, **fields: Any) -> dict[str, Any]:
    return decision(plan_id, parent, "tool_invocation", chosen_option=f"run {cmd}",
                    tool={"name": "shell", "arguments": {"cmd": cmd}}, **fields)


async def started(js: Any, db: AsyncDatabase[Document], **fields: Any) -> dict[str, Any]:
    r = root(**fields)
    await publish_all(js, [r])
    await until(lambda: db["decisions"].find_one({"_id": r["decision_id"]}))
    return r


async def letter(db: AsyncDatabase[Document], d: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = await until(
        lambda: db["dead_letters"].find_one({"decision_id": d["decision_id"]}))
    return found


async def recorded(db: AsyncDatabase[Document], d: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = await until(
        lambda: db["decisions"].find_one({"_id": d["decision_id"]}))
    return found


async def test_a_check_that_passes_records_one_that_fails_refuses_and_blocks_the_plan(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document],
        agents: Agents) -> None:  # noqa: F811  # the fixture, imported above
    js = nc.jetstream()
    inv = await service.add_invariant("no-rm-rf", "Never rm -rf", check=NO_RM)
    r = await started(js, db)
    plan = r["plan_id"]
    ok, bad = shell(plan, r["decision_id"], "ls -la"), shell(plan, r["decision_id"], "rm -rf /")
    await publish_all(js, [ok, bad])
    await recorded(db, ok)
    refused = await letter(db, bad)
    assert [e["rule"] for e in refused["errors"]] == ["invariant_violated"]
    assert "no-rm-rf" in refused["errors"][0]["message"]

    violation = await until(lambda: db["invariant_violations"].find_one(
        {"decision_id": bad["decision_id"]}))
    assert (violation["invariant_id"], violation["severity"], violation["found_by"],
            violation["resolved_at"]) == (inv.id, "error", "check", None)
    violated = await until(lambda: _events(nc, f"invariants.events.{plan}.violated", 1))
    assert violated[0]["violation"]["violation_id"] == violation["_id"]
    assert violated[0]["plan_blocked"] is True
    # The refusal's record hangs where the refused decision would have: under its parent.
    enforced = await until(lambda: db["decisions"].find_one(
        {"plan_id": plan, "decision_type": "invariant_enforced",
         "chosen_option": f"refused decision {bad['decision_id']}"}))
    assert enforced["parent_decision_id"] == r["decision_id"]

    # The open error violation blocks the Execute phase: the phase rule.
    later = shell(plan, r["decision_id"], "ls")
    await publish_all(js, [later])
    assert [e["rule"] for e in (await letter(db, later))["errors"]] == \
        ["reconciliation_blocked"]
    await service.resolve_violation(violation["_id"])
    again = shell(plan, r["decision_id"], "ls")
    await publish_all(js, [again])
    await recorded(db, again)
    # What the gate wrote is a link of the plan's record chain like any report.
    assert violation["chain"][0]["kind"] == "violation.report"
    audit = await agents("audit", "verify", plan, "--json")
    assert audit.code == 0 and json.loads(audit.out)["ok"] is True, audit.out


async def test_each_severity_and_consequence(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    prod = 'paths.exists(p, p.startsWith("deploy/prod/"))'
    await service.add_invariant("prod-needs-approval", "Writes to prod need a person",
                                check=f"!({prod})", consequence=Consequence.HOLD)
    await service.add_invariant("confident", "Confidence at least 0.5",
                                check="confidence == null || confidence >= 0.5",
                                severity=Severity.WARNING)
    await service.add_invariant("no-docs", "Say when docs are touched",
                                check='!paths.exists(p, p.startsWith("docs/"))',
                                severity=Severity.INFO)
    r = await started(js, db)
    plan, parent = r["plan_id"], r["decision_id"]
    unsure = decision(plan, parent, "implementation_choice", confidence_score=0.2)
    docs = decision(plan, parent, "strategy_choice",
                    artifacts_produced=[{"artifact_path": "docs/a.md", "artifact_type": "file"}])
    await publish_all(js, [unsure, docs])
    for d, severity, name in ((unsure, "warning", "confident"), (docs, "info", "no-docs")):
        await recorded(db, d)
        v = await until(lambda d=d: db["invariant_violations"].find_one(
            {"decision_id": d["decision_id"]}))
        assert v["severity"] == severity
        child = await until(lambda d=d: db["decisions"].find_one(
            {"parent_decision_id": d["decision_id"], "decision_type": "invariant_enforced"}))
        assert child["question"] == f"Invariant {name}"
    assert await service.blocked_plans([plan]) == set()

    held = decision(plan, parent, "tool_invocation", artifacts_produced=[
        {"artifact_path": "deploy/prod/app.yaml", "artifact_type": "file"}])
    await publish_all(js, [held])
    await recorded(db, held)
    hold = await until(lambda: db["decision_holds"].find_one({"_id": held["decision_id"]}))
    assert hold["status"] == "awaiting_approval"
    assert [r["invariant_name"] for r in hold["reasons"]] == ["prod-needs-approval"]
    assert await until(lambda: _blocked(service, plan))


async def test_evaluation_errors_refuse_under_error_and_record_under_warning(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    strict = await service.add_invariant(
        "cmd-short", "Commands are short", check="size(tool.arguments.cmd) < 100",
        scope=InvariantScope.PROJECT, scope_target="strict")
    await service.add_invariant(
        "cmd-short", "Commands are short", check="size(tool.arguments.cmd) < 100",
        scope=InvariantScope.PROJECT, scope_target="lax", severity=Severity.WARNING)
    strict_root = await started(js, db, project="strict")
    lax_root = await started(js, db, project="lax")
    no_cmd = decision(strict_root["plan_id"], strict_root["decision_id"], "tool_invocation",
                      tool={"name": "http", "arguments": {"url": "https://x"}})
    lax = decision(lax_root["plan_id"], lax_root["decision_id"], "tool_invocation",
                   tool={"name": "http", "arguments": {"url": "https://x"}})
    await publish_all(js, [no_cmd, lax])
    refused = await letter(db, no_cmd)
    assert [e["rule"] for e in refused["errors"]] == ["invariant_unevaluated"]
    assert strict.id in refused["errors"][0]["message"]
    await recorded(db, lax)
    v = await until(lambda: db["invariant_violations"].find_one(
        {"decision_id": lax["decision_id"]}))
    assert v["severity"] == "warning" and "cmd" in v["details"]


async def test_scopes_and_precedence(service: InvariantService, nc: nats.NATS,
                                     db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    allow = "true"
    deny = 'decision_type != "tool_invocation"'
    excepted = new_id()
    await service.add_invariant("no-tools", "No tools at all", check=deny)
    await service.add_invariant("no-tools", "Tools allowed in sandbox", check=allow,
                                scope=InvariantScope.PROJECT, scope_target="sandbox")
    await service.add_invariant("no-tools", "No tools, even in sandbox, when migrating",
                                check=deny, scope=InvariantScope.ACTION,
                                scope_target="migrate")
    await service.add_invariant("no-tools", "This plan may", check=allow,
                                scope=InvariantScope.PLAN, scope_target=excepted)
    cases = {  # root fields -> whether its tool_invocation is recorded
        "global": ({}, False),
        "project": ({"project": "sandbox"}, True),
        "action": ({"project": "sandbox", "action_template": "migrate"}, False),
        "plan": ({"plan_id": excepted, "project": "sandbox", "action_template": "migrate"},
                 True),
    }
    tools = {}
    for name, (fields, _) in cases.items():
        plan_id = fields.pop("plan_id", None)
        r = root(plan_id, **fields)
        await publish_all(js, [r])
        await recorded(db, r)
        tools[name] = decision(r["plan_id"], r["decision_id"], "tool_invocation")
    await publish_all(js, list(tools.values()))
    for name, (_, allowed) in cases.items():
        if allowed:
            await recorded(db, tools[name])
        else:
            assert [e["rule"] for e in (await letter(db, tools[name]))["errors"]] == \
                ["invariant_violated"], name


async def test_an_invariant_added_while_agents_record_binds_the_next_batch(
        service: InvariantService, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    r = await started(js, db)
    plan, parent = r["plan_id"], r["decision_id"]
    before = shell(plan, parent, "rm -rf /tmp/x")
    await publish_all(js, [before])
    await recorded(db, before)

    async def agent() -> None:
        for _ in range(20):
            await publish_all(js, [shell(plan, parent, "ls")])
            await asyncio.sleep(0.02)

    running = asyncio.create_task(agent())
    await service.add_invariant("no-rm-rf", "Never rm -rf", check=NO_RM)
    await running
    after = shell(plan, parent, "rm -rf /tmp/y")
    await publish_all(js, [after])
    assert [e["rule"] for e in (await letter(db, after))["errors"]] == ["invariant_violated"]


async def _events(nc: nats.NATS, subject: str, n: int) -> list[dict[str, Any]] | None:
    got = [ev for _, ev, _ in await events(nc, subject, settle=0.3)]
    return got if len(got) >= n else None


async def _blocked(service: InvariantService, plan: str) -> bool:
    return plan in await service.blocked_plans([plan])


async def test_an_agents_client_names_the_tool_and_learns_of_the_refusal(
        service: InvariantService, nats_server: ManagedServer) -> None:
    await service.add_invariant("no-rm-rf", "Never rm -rf", check=NO_RM)
    async with DecisionRecorder.connect(nats_server.url) as rec:
        r = await rec.root("Clean the build", context="clean it")
        ok = await rec.record(parent=r, decision_type="tool_invocation", question="How?",
                              chosen_option="make clean", context="clean it",
                              tool=ToolCall(name="shell", arguments={"cmd": "make clean"}))
        bad = await rec.record(parent=r, decision_type="tool_invocation", question="How?",
                               chosen_option="wipe it", context="clean it",
                               tool=ToolCall(name="shell", arguments={"cmd": "rm -rf /"}))
        assert (await rec.wait_persisted(ok, timeout=20)).sequence_number == 1
        with pytest.raises(DecisionRejectedError) as caught:
            await rec.wait_persisted(bad, timeout=20)
    [error] = caught.value.rejection.errors
    assert error.rule is Rule.INVARIANT_VIOLATED and "no-rm-rf" in error.message


async def test_a_held_decision_is_announced_held(service: InvariantService,
                                                 nats_server: ManagedServer) -> None:
    await service.add_invariant("prod-needs-a-person", "Writes to prod need approval",
                                check='!artifacts.exists(p, p.startsWith("deploy/prod/"))',
                                consequence=Consequence.HOLD)
    async with DecisionRecorder.connect(nats_server.url) as rec:
        r = await rec.root("Ship it", context="ship")
        staging = await rec.record(parent=r, decision_type="implementation_choice",
                                   question="Where?", chosen_option="staging first",
                                   context="ship", artifacts=["deploy/staging/app.yaml"])
        prod = await rec.record(parent=staging, decision_type="implementation_choice",
                                question="Then?", chosen_option="prod", context="ship",
                                artifacts=["deploy/prod/app.yaml"])
        assert (await rec.wait_persisted(staging, timeout=20)).hold is None
        assert (await rec.wait_persisted(prod, timeout=20)).hold == "awaiting_approval"
