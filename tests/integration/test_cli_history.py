"""`agents plan tree --as-of`, `agents correction diff` and the dry run of a superseded
target, against the real servers and workers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
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


def ids(tree_json: dict[str, object]) -> set[str]:
    return {d["decision_id"] for d in tree_json["decisions"]}  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_history_as_of_diff_and_dry_run_of_a_superseded_target(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db)
    plan_id, target = tree[0]["plan_id"], tree[1]["decision_id"]
    before_revert = datetime.now(UTC)
    revert = (await agents.ok("plan", "correct", "--mode", "revert", target, "--guidance",
                              "Use a token bucket.", "--wait", "--json")).json
    assert revert["status"] == "applied"
    cid = revert["correction_id"]
    shown = (await agents.ok("correction", "show", cid, "--json")).json
    replacement, superseded = shown["new_decision_id"], set(shown["superseded_ids"])
    assert target in superseded

    # The tree before the revert holds the old branch; after it, the replacement.
    old = (await agents.ok("plan", "tree", plan_id, "--as-of", cid, "--before", "--json")).json
    assert old["as_of"] == {"sequence_number": 11}
    assert ids(old) == {d["decision_id"] for d in tree}
    new = (await agents.ok("plan", "tree", plan_id, "--as-of", cid, "--json")).json
    assert replacement in ids(new) and not ids(new) & superseded
    current = (await agents.ok("plan", "tree", plan_id, "--json")).json
    assert ids(new) == ids(current)
    by_time = (await agents.ok("plan", "tree", plan_id, "--as-of",
                               before_revert.isoformat(), "--json")).json
    assert ids(by_time) == ids(old)
    later = (await agents.ok("plan", "tree", plan_id, "--as-of",
                             datetime.now(UTC).isoformat(), "--json")).json
    assert ids(later) == ids(new)
    text = (await agents.ok("plan", "tree", plan_id, "--as-of", cid, "--before")).out
    assert "tree as of sequence #11" in text and "later superseded by" in text
    assert_one_line_error(await agents("plan", "tree", plan_id, "--as-of", "yesterday"), 2,
                          "neither a correction ID nor an ISO time")
    assert_one_line_error(await agents("plan", "tree", plan_id, "--as-of",
                                       before_revert.isoformat(), "--before"), 2,
                          "--before goes with --as-of CORRECTION_ID")

    # What the revert changed.
    diff = (await agents.ok("correction", "diff", cid, "--json")).json
    assert diff["status"] == "applied" and diff["applied_at"]
    assert {b["decision_id"] for b in diff["superseded"]} == superseded
    assert diff["superseded_count"] == len(superseded)
    assert [b["decision_id"] for b in diff["added"]] == [replacement]
    assert diff["added"][0]["chosen_option"] == "Use a token bucket."
    assert diff["archived_artifacts_path"] == shown["archived_artifacts_path"]
    assert Path(diff["manifest_path"]).is_file()
    text = (await agents.ok("correction", "diff", cid)).out
    assert f"superseded ({len(superseded)})" in text and "added (1)" in text
    assert "manifest: " in text and replacement in text
    explained = (await agents.ok("plan", "explain", target, "--json")).json["decision"]
    assert explained["superseded_by_correction"] == cid and explained["superseded_at"]
    assert f"(correction {cid}, " in (await agents.ok("plan", "explain", target)).out

    await _append_diff_and_dry_run(agents, plan_id, target, replacement)


async def _append_diff_and_dry_run(agents: Agents, plan_id: str, target: str,
                                   replacement: str) -> None:
    # An append: the intervention and the child plan's root are added.
    append = (await agents.ok("plan", "correct", "--mode", "append", replacement,
                              "--guidance", "Also add metrics.", "--wait", "--json")).json
    assert append["status"] == "applied"
    adiff = (await agents.ok("correction", "diff", append["correction_id"], "--json")).json
    [child] = adiff["child_plans_spawned"]
    assert adiff["superseded"] == [] and len(adiff["added"]) == 2
    intervention, child_root = adiff["added"]
    assert intervention["decision_type"] == "user_intervention"
    assert intervention["plan_id"] == plan_id
    assert child_root["decision_type"] == "prompt_definition"
    assert child_root["plan_id"] == child
    text = (await agents.ok("correction", "diff", append["correction_id"])).out
    assert f"child plan spawned: {child}" in text and "user_intervention" in text

    # A dry run of the superseded target is a report naming the current replacement.
    report = (await agents.ok("plan", "correct", "--mode", "revert", target, "--dry-run",
                              "--json")).json
    assert report["current_replacement_id"] == replacement
    assert any("already superseded" in w and replacement in w for w in report["warnings"])
    assert_one_line_error(await agents("plan", "correct", "--mode", "revert", target,
                                       "--guidance", "again"), 1, "already superseded by")
