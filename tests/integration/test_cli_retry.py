"""The specification's `agents plan correct --mode=revert ID` (no guidance) and `agents
correction retry ID` (ADR 0017), as an operator runs them: subprocesses against the real servers and
`python -m workers`."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.requests import reverted_choice
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import worker_env
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import (
    Agents,
    agents,
    assert_one_line_error,
    cli_workers,
    seed_plan,
)

__all__ = ["agents", "cli_workers"]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_the_seeds_revert_runs_without_guidance(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db)
    target = tree[1]["decision_id"]

    report = (await agents.ok("plan", "correct", "--mode=revert", target, "--dry-run",
                              "--json")).json
    assert report["impact"]["target_decision_id"] == target
    assert await db.corrections.count_documents({}) == 0
    assert_one_line_error(await agents("plan", "correct", "--mode=append", target), 2,
                          "--guidance is required for an append")

    done = (await agents.ok("plan", "correct", "--mode=revert", target, "--wait",
                            "--json")).json
    assert done["status"] == "applied"
    shown = (await agents.ok("correction", "show", done["correction_id"], "--json")).json
    assert shown["guidance"] == f"Revert of decision {target} requested by tester"
    new = await db.decisions.find_one({"_id": shown["new_decision_id"]})
    assert new is not None
    assert new["chosen_option"] == reverted_choice(tree[1]['chosen_option'])
    assert new["correction_reason"] == shown["guidance"]

    # Without --wait: requested, and it is applied by the workers all the same.
    current = shown["new_decision_id"]
    out = (await agents.ok("plan", "correct", "--mode=revert", current)).out
    assert "requested" in out


async def test_a_failed_correction_retried_after_the_fix_ends_applied_with_two_attempts(
        nats_server: ManagedServer, mongo_uri: str, db_name: str, agents: Agents,
        nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    env = worker_env(nats_server.url, mongo_uri, db_name, CORRECTIONS_RETRY_DELAY="0.2",
                     ARCHIVE_ROOT=str(tmp_path / "a-file" / "archive"))
    broken = InProcessWorkers(env, tmp_path / "broken.log")
    await broken.start(nats_server.url)
    try:
        tree = await seed_plan(nc.jetstream(), db)
        r = await agents("plan", "correct", "--mode=revert", tree[1]["decision_id"],
                         "--wait", "--json")
        assert r.code == 3, (r.out, r.err)  # FAILED
        cid = r.json["correction_id"]
    finally:
        await broken.stop()

    fixed = InProcessWorkers({**env, "ARCHIVE_ROOT": str(tmp_path / "archive")},
                             tmp_path / "fixed.log")
    await fixed.start(nats_server.url)
    try:
        done = (await agents.ok("correction", "retry", cid, "--reason", "archive moved",
                                "--wait", "--timeout", "60", "--json")).json
        assert done["status"] == "applied"
        assert [e["to_status"] for e in done["events"]] == [
            "pending", "analyzing", "executing", "applied"]
        attempts = (await agents.ok("correction", "attempts", cid, "--json")).json
        states = [a["state"] for a in attempts]
        assert len(states) >= 2 and states[-1] == "complete"
        assert set(states[:-1]) == {"failed"}
        history = (await agents.ok("correction", "show", cid)).out
        assert "failed → pending" in history and "archive moved" in history

        assert_one_line_error(await agents("correction", "retry", cid), 1,
                              f"retry refused: correction {cid} is applied")
    finally:
        await fixed.stop()
