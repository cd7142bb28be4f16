"""`agents plan tree` and `agents plan explain` against the real servers, by --json and by text."""

from __future__ import annotations

import time

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.ids import new_id
from store.database import Document
from tests.conftest import start_cost
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import (
    Agents,
    agents,
    assert_one_line_error,
    cli_workers,
    seed_plan,
)

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e


async def test_tree_and_explain(cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
                                db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db)
    plan_id, root_id = tree[0]["plan_id"], tree[0]["decision_id"]
    leaf = tree[-1]

    shown = (await agents.ok("plan", "tree", plan_id, "--json")).json
    assert shown["plan_id"] == plan_id
    assert sorted(d["decision_id"] for d in shown["decisions"]) == sorted(
        d["decision_id"] for d in tree)
    assert [d["sequence_number"] for d in shown["decisions"]] == list(range(12))
    assert shown["decisions"][0]["depth"] == 0 and shown["corrections"] == []

    text = (await agents.ok("plan", "tree", plan_id)).out
    assert f"plan {plan_id}" in text and "current tree, 12 decision(s)" in text
    # Piped (as here): every ID whole.
    assert "prompt_definition" in text and root_id in text and "conf 0.80" in text

    top = await agents.ok("plan", "tree", plan_id, "--depth", "0", "--json")
    assert [d["decision_id"] for d in top.json["decisions"]] == [root_id]
    assert "11 more below" in (await agents.ok("plan", "tree", plan_id, "--depth", "0")).out

    full = (await agents.ok("plan", "explain", leaf["decision_id"], "--json")).json
    assert full["decision"]["decision_id"] == leaf["decision_id"]
    assert "context_snapshot" not in full["decision"]
    assert "actor_reasoning" not in full["decision"]
    assert full["path"][0]["decision_id"] == root_id
    assert full["path"][-1]["decision_id"] == leaf["parent_decision_id"]
    deep = (await agents.ok("plan", "explain", leaf["decision_id"], "--json", "--show-context",
                            "--show-reasoning")).json
    assert deep["decision"]["context_snapshot"]["hot_context_hash"].startswith("sha256:")
    assert deep["decision"]["actor_reasoning"] == leaf["actor_reasoning"]

    text = (await agents.ok("plan", "explain", root_id, "--show-context",
                            "--show-reasoning")).out
    for line in ("path from the root", "alternatives considered", "Rewrite from scratch",
                 "downstream", "context snapshot", "actor reasoning",
                 "The flag lets us roll back quickly."):
        assert line in text, line

    unknown = new_id()
    assert_one_line_error(await agents("plan", "tree", unknown), 1,
                          f"no decisions recorded for plan {unknown}")
    assert_one_line_error(await agents("plan", "explain", unknown, "--json"), 1,
                          f"no decision {unknown} is recorded")
    assert_one_line_error(await agents("plan", "tree", "not-an-id"), 2, "is not a ULID")
    assert (await agents("plan", "explain", unknown, "--json")).out == ""


async def test_missing_servers_are_one_line_and_fast(agents: Agents) -> None:
    """A smoke test of the installed command as an operator runs it: its own process,
    its exit code and its stderr (the other CLI tests run it in-process)."""
    agents = Agents(agents.env, subprocess=True)
    started = time.monotonic()
    r = await agents("plan", "tree", new_id(),
                     env={"MONGODB_URI": "mongodb://127.0.0.1:1/?directConnection=true"})
    assert_one_line_error(r, 1, "cannot reach MongoDB at MONGODB_URI=mongodb://127.0.0.1:1")
    # MongoDB's 3 s selection timeout, plus the start (twice what one takes right now).
    assert time.monotonic() - started < 3 + 2 + 2 * start_cost(agents.env)
    r = await agents("invariant", "resolve", new_id(), env={"NATS_URL": "nats://127.0.0.1:1"})
    assert_one_line_error(r, 1, "cannot reach NATS at NATS_URL=nats://127.0.0.1:1")
