"""What a new operator meets in a first hour with `agents`, against the real servers and
workers: IDs usable as printed, lists that find things, outputs that tell the truth."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from cli.status import EXIT_ATTENTION
from contracts.corrections.changes import Changes
from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionStatus
from contracts.shared.ids import new_id
from store.database import Document
from store.mongo_store import MongoStore
from tests.conftest import ROOT
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

ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NARROW = {"COLUMNS": "80"}


def ids_in(text: str) -> set[str]:
    return set(ULID.findall(text))


async def reverted(agents: Agents, tree: list[dict[str, object]]) -> str:
    """A revert of the tree's second decision, applied; its correction ID."""
    done = await agents.ok("plan", "correct", "--mode", "revert", str(tree[1]["decision_id"]),
                           "--guidance", "Use a token bucket", "--wait", "--json")
    assert done.json["status"] == "applied", done.out
    return str(done.json["correction_id"])


async def test_ids_are_whole_when_piped_and_read_by_their_last_characters(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=6)
    plan_id, root_id = str(tree[0]["plan_id"]), str(tree[0]["decision_id"])
    first = await agents.ok("plan", "correct", "--mode", "append", str(tree[-1]["decision_id"]),
                            "--guidance", "Add a changelog entry", "--wait", "--json")
    cid = await reverted(agents, tree)
    # Newest first: --limit keeps the newest, not the first ever made.
    newest = (await agents.ok("correction", "list", "--limit", "1", "--json")).json
    assert [c["correction_id"] for c in newest] == [cid]
    assert [c["correction_id"] for c in (await agents.ok("correction", "list", "--json")
                                         ).json] == [cid, first.json["correction_id"]]
    inv = (await agents.ok("invariant", "add", "tests-pass", "--description", "Run them",
                           "--json")).json
    await nc.jetstream().publish(f"decisions.recorded.{plan_id}", b"not json")
    vid = new_id()
    await nc.jetstream().publish(f"invariants.violations.{plan_id}", json.dumps({
        "violation_id": vid, "invariant_id": inv["id"], "plan_id": plan_id,
        "severity": "warning", "details": "skipped them"}).encode(),
        headers={"Nats-Msg-Id": vid})
    assert await wait_for_count(db, "dead_letters", 1, timeout=30) == 1
    assert await wait_for_count(db, "invariant_violations", 1, timeout=30) == 1

    # Piped at 80 columns (as here: the runner's stdout is no terminal), every ID whole,
    # one row a line, tab-separated: `agents correction list | grep ID` finds it.
    listed = (await agents.ok("correction", "list", env=NARROW)).out
    row = next(line for line in listed.splitlines() if cid in line)
    assert row.split("\t")[:3] == [cid, plan_id, str(tree[1]["decision_id"])]
    assert inv["id"] in (await agents.ok("invariant", "list", env=NARROW)).out
    # A violation names the invariant it broke.
    violation = next(line for line in (await agents.ok(
        "invariant", "violations", env=NARROW)).out.splitlines() if vid in line)
    assert f"tests-pass {inv['id']}" in violation and plan_id in violation
    attempts = (await agents.ok("correction", "attempts", cid, env=NARROW)).out
    assert attempts.splitlines()[0].split("\t")[-1] == "error"
    assert "DECISIONS:" in (await agents.ok("dead-letters", "list", env=NARROW)).out
    status = await agents("status", env=NARROW)
    assert ids_in(status.out) and "…" not in status.out
    tree_out = (await agents.ok("plan", "tree", plan_id, env=NARROW)).out
    assert root_id in tree_out and "…" not in tree_out
    assert all(len(line) > 80 for line in tree_out.splitlines()[1:3])  # never cut

    # On a terminal: the tree shortens IDs (and --full-ids does not); tables never cut
    # an ID, even at 80 columns.
    terminal = {**NARROW, "TEST_TERMINAL": "1"}
    short = ANSI.sub("", (await agents.ok("plan", "tree", plan_id, env=terminal)).out)
    assert f"…{root_id[-8:]}" in short and root_id not in short
    full = ANSI.sub("", (await agents.ok("plan", "tree", plan_id, "--full-ids",
                                         env=terminal)).out)
    assert root_id in full
    table = ANSI.sub("", (await agents.ok("correction", "list", env=terminal)).out)
    assert cid in table

    # Any ID may be typed as its last characters, with or without the tree's `…`.
    leaf = str(tree[-1]["decision_id"])
    explained = (await agents.ok("plan", "explain", leaf[-8:], "--json")).json
    assert explained["decision"]["decision_id"] == leaf
    assert (await agents.ok("plan", "explain", "…" + leaf[-8:].lower(), "--json")
            ).json["decision"]["decision_id"] == leaf
    assert (await agents.ok("correction", "show", cid[-6:], "--json")).json[
        "correction_id"] == cid
    assert (await agents.ok("plan", "tree", plan_id[-8:], "--json")).json["plan_id"] == plan_id
    assert_one_line_error(await agents("plan", "explain", "ZZZZZZZZZ"), 1,
                          "no decision ID ends with ZZZZZZZZZ")
    assert_one_line_error(await agents("plan", "explain", "ab"), 2, "is not a ULID")

    # --json parses on every command that prints.
    for args in (("plan", "list"), ("plan", "tree", plan_id), ("plan", "explain", leaf),
                 ("correction", "list"), ("correction", "show", cid),
                 ("correction", "attempts", cid), ("correction", "diff", cid),
                 ("invariant", "list"), ("invariant", "violations"),
                 ("dead-letters", "list"), ("status",)):
        r = await agents(*args, "--json")
        assert r.code in (0, EXIT_ATTENTION), (args, r.err)
        json.loads(r.out)


async def test_plans_are_listed_newest_first_with_filters(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    first = await seed_plan(nc.jetstream(), db, size=3, seed=1)
    second = await seed_plan(nc.jetstream(), db, size=3, seed=2)
    older, newer = str(first[0]["plan_id"]), str(second[0]["plan_id"])
    listed = (await agents.ok("plan", "list", "--json")).json
    assert [p["plan_id"] for p in listed["plans"]] == [newer, older]
    assert listed["plans"][0]["status"] == "active" and listed["next_before"] is None
    page = (await agents.ok("plan", "list", "--limit", "1", "--json")).json
    assert [p["plan_id"] for p in page["plans"]] == [newer]
    rest = (await agents.ok("plan", "list", "--before", page["next_before"], "--json")).json
    assert [p["plan_id"] for p in rest["plans"]] == [older]
    text = (await agents.ok("plan", "list", "--limit", "1")).out
    assert f"older plans: --before {page['next_before']}" in text
    assert (await agents.ok("plan", "list", "--text", "RATE limiting", "--since", "1h",
                            "--json")).json["plans"]
    assert (await agents.ok("plan", "list", "--project", "nothing-like-it", "--json")
            ).json["plans"] == []
    assert (await agents.ok("plan", "list", "--status", "completed", "--json")
            ).json["plans"] == []
    assert_one_line_error(await agents("plan", "list", "--since", "last week"), 2,
                          "neither an ISO time")

    # Completed by an operator: recorded through the workers, with who, when and why.
    done = (await agents.ok("plan", "complete", older, "--reason", "shipped", "--json")).json
    assert done["status"] == "completed" and done["record"]["ended_by"] == "unverified"
    assert [p["plan_id"] for p in (await agents.ok(
        "plan", "list", "--status", "completed", "--json")).json["plans"]] == [older]
    assert_one_line_error(await agents("plan", "abandon", older), 1,
                          "abandoned refused", "only an active plan")


async def test_a_dead_letter_no_retry_can_fix_is_discarded_not_retried(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    plan_id = new_id()
    js = nc.jetstream()
    for _ in range(2):
        await js.publish(f"decisions.recorded.{plan_id}", b"not json",
                         headers={"Nats-Msg-Id": new_id()})
    assert await wait_for_count(db, "dead_letters", 2, timeout=30) == 2
    first, second = [d["id"] for d in (await agents.ok("dead-letters", "list", "--json")).json]
    # Hostile bytes on an upkeep subject are kept as a dead letter too (and discarded).
    await js.publish(f"decisions.comment.{plan_id}", b"{not json")
    assert await wait_for_count(db, "dead_letters", 1, timeout=30,
                                query={"subject": f"decisions.comment.{plan_id}"}) == 1
    await agents.ok("dead-letters", "discard", "--rule", "not_json", "--plan", plan_id,
                    "--reason", "x", "--limit", "1")
    assert await wait_for_count(db, "dead_letters", 1, timeout=30,
                                query={"discarded_at": {"$ne": None}}) == 1
    # Nothing is republished: the same bytes would be dead-lettered again at once.
    assert_one_line_error(await agents("dead-letters", "retry", first), 1,
                          "not retried", "rule not_json would refuse them again",
                          f"agents dead-letters discard {first}")
    assert await db.dead_letters.count_documents({"discarded_at": None}) == 2
    bulk = await agents("dead-letters", "retry", "--rule", "not_json", "--json")
    assert bulk.code == 1 and bulk.json["retried"] == 0 and bulk.json["refused"] == 2
    assert_one_line_error(await agents("dead-letters", "discard", first), 2, "--reason")

    done = (await agents.ok("dead-letters", "discard", first, "--reason", "garbage",
                            "--json")).json
    assert done == {"discarded": [first], "status": "recorded", "reason": "garbage"}
    assert [d["id"] for d in (await agents.ok("dead-letters", "list", "--json")).json] == [
        second]
    gone = (await agents.ok("dead-letters", "list", "--discarded", "--json")).json
    assert (first, "unverified", "garbage") in [
        (d["id"], d["discarded_by"], d["discard_reason"]) for d in gone]
    assert "dead letter" in " ".join((await agents("status", "--json")).json["attention"])
    await agents.ok("dead-letters", "discard", "--rule", "not_json", "--reason", "garbage")
    healthy = await agents("status", "--json")
    assert healthy.code == 0 and healthy.json["dead_letters"] == 0, healthy.out


async def test_a_correction_requested_with_the_workers_stopped_is_queued_and_cancellable(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=4)
    plan_id, target = str(tree[0]["plan_id"]), str(tree[1]["decision_id"])
    await cli_workers.stop()

    # No worker: a dry run says so at once, a request is stored and shown queued.
    assert_one_line_error(await agents("plan", "correct", "--mode", "revert", target,
                                       "--dry-run"), 1, "no worker answers dry runs")
    waited = await agents("plan", "correct", "--mode", "revert", target, "--wait",
                          "--timeout", "2")
    assert_one_line_error(waited, 1, "is still queued", "do not request it again")
    cid = re.search(r"correction ([0-9A-Z]{26}) requested", waited.out)
    assert cid, waited.out
    shown = (await agents.ok("correction", "show", cid[1], "--json")).json
    assert (shown["status"], shown["requested_by"], shown["cancel_queued"]) == (
        "queued", "tester", False)
    assert shown["requested_at"] is not None
    text = (await agents.ok("correction", "show", cid[1][-8:])).out
    assert "queued" in text and "no worker has taken it up" in text
    listed = (await agents.ok("correction", "list", "--json")).json
    assert [(c["correction_id"], c["status"]) for c in listed] == [(cid[1], "queued")]

    cancelled = (await agents.ok("correction", "cancel", cid[1], "--reason",
                                 "asked too early", "--timeout", "1", "--json")).json
    assert cancelled["status"] == "cancel_queued"
    assert (await agents.ok("correction", "show", cid[1], "--json")).json["cancel_queued"]

    # The workers come back: the request is recorded, cancelled before it runs.
    await cli_workers.start(cli_workers.env["NATS_URL"])
    assert await wait_for_count(db, "corrections", 1, timeout=30,
                                query={"status": "cancelled"}) == 1
    final = (await agents.ok("correction", "show", cid[1], "--json")).json
    assert [t["to_status"] for t in final["history"]] == ["pending", "cancelled"]
    assert final["history"][-1]["reason"] == "asked too early"
    assert await db.decisions.count_documents({"plan_id": plan_id,
                                               "superseded_by": {"$ne": None}}) == 0


async def test_errors_say_what_the_id_is_and_what_to_do(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document], tmp_path: Path) -> None:
    """A decision given as a plan, a rolled-back child plan, an invariant on a decision,
    a superseded descendant: each refusal names what the ID is and what to ask instead;
    a revert with archiving off says why nothing was copied."""
    code, out = await run_example(agents)
    assert code == 0, out
    plan_id = re.search(r"^plan_id (\w{26})  \(child plan (\w{26})\)", out, re.M)
    kinds = dict(re.findall(r"^  (\w+) +(\w{26})  seq", out, re.M))
    assert plan_id, out
    parent, child = plan_id[1], plan_id[2]
    strategy, middleware = kinds["strategy_choice"], kinds["implementation_choice"]

    assert_one_line_error(await agents("plan", "tree", strategy), 1,
                          f"{strategy} is a decision of plan {parent}, not a plan",
                          f"agents plan tree {parent}")
    assert_one_line_error(await agents("invariant", "add", "x", "--description", "d",
                                       "--plan", strategy), 1,
                          f"--plan {strategy} is a decision of plan {parent}, not a plan")
    dry = (await agents.ok("plan", "correct", "--mode", "revert", strategy, "--dry-run")).out
    assert "Archiving is off on this worker" in dry
    assert re.search(r"estimated recompute time: \d+ (min \d+ )?s\n", dry), dry

    done = (await agents.ok("plan", "correct", "--mode", "revert", strategy, "--wait",
                            "--json")).json
    cid = done["correction_id"]
    assert_one_line_error(await agents("plan", "tree", child), 1,
                          f"plan {child} has no current decision: all 2 are superseded",
                          f"rolled back by correction {cid}", "--show-superseded")
    assert_one_line_error(await agents("plan", "correct", "--mode", "revert", middleware), 1,
                          f"correction {cid} reverted its ancestor {strategy}",
                          "it has no replacement of its own")
    diff = (await agents.ok("correction", "diff", cid, "--json")).json
    assert diff["archive_not_copied_count"] == 4
    assert all("ARTIFACTS_ROOT is unset" in n["skipped"] for n in diff["archive_not_copied"])
    # A revert without guidance does not read as the original choice made again.
    replacement = (await agents.ok("plan", "explain", diff["added"][0]["decision_id"],
                                   "--json")).json["decision"]
    assert replacement["chosen_option"] == (
        "(reverted; no replacement chosen) was: Redis INCR with a TTL per window")

    # Counts: the parent's own decisions, not its child plan's (plan list = plan tree).
    listed = {p["plan_id"]: p for p in (await agents.ok("plan", "list", "--json")).json[
        "plans"]}
    current = (await agents.ok("plan", "tree", parent, "--json")).json["decisions"]
    assert listed[parent]["current"] == len(current) == 2
    assert (listed[child]["status"], listed[child]["current"]) == ("rolled_back", 0)
    # The tree as it was before the revert shows the child plan active, as it was then.
    before = (await agents.ok("plan", "tree", parent, "--as-of", cid, "--before")).out
    assert f"→ child plan {child} (active)" in before


async def run_example(agents: Agents) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / "agent_records_plan.py"), cwd=ROOT,
        env=agents.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_status_names_failed_and_long_pending_corrections(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=3)
    plan_id = str(tree[0]["plan_id"])
    store = MongoStore(db)
    request = CorrectionRequest(plan_id=plan_id, decision_id=str(tree[1]["decision_id"]),
                                mode="revert", guidance="g", requested_by="tester")
    now = datetime.now(UTC)
    c = Correction.from_request(request, now)
    await store.writer.commit(Changes(c, None), now)
    failed = c.transition(CorrectionStatus.ANALYZING, now).transition(
        CorrectionStatus.FAILED, now, error="archive volume lost")
    await store.writer.commit(Changes(failed, 1), now)
    r = await agents("status", "--json")
    assert r.code == EXIT_ATTENTION, r.out
    assert (r.json["corrections_failed"], r.json["corrections_failed_last_24h"]) == (1, 1)
    assert any(a.startswith("1 correction(s) FAILED in the last 24 h")
               for a in r.json["attention"]), r.json["attention"]
    shown = await agents("status")
    assert "corrections failed: 1 (1 in the last 24 h" in shown.out, (shown.code, shown.err)


async def test_agents_up_with_dead_servers_exported_is_one_line(agents: Agents,
                                                                tmp_path: Path) -> None:
    """A stale `export NATS_URL=… MONGODB_URI=…` (an earlier run's) starts no server; the
    command says which do not answer and what to do, in one line, and exits 1."""
    up = Agents({**agents.env, "NATS_URL": "nats://127.0.0.1:1",
                 "MONGODB_URI": "mongodb://127.0.0.1:1/?directConnection=true"},
                subprocess=True)
    r = await up("up", "--data-dir", str(tmp_path / "d"), "--health-port", "0",
                 "--console-port", "0")
    assert r.code == 1, (r.out, r.err)
    assert "Traceback" not in r.out + r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert_one_line_error(r, 1, "NATS_URL and MONGODB_URI are exported",
                          "unset NATS_URL MONGODB_URI")


async def test_help_shows_no_value_for_flags(agents: Agents) -> None:
    """`--dry-run <bool>` read as if it took a value; flags show none."""
    for args in (("plan", "correct"), ("plan", "tree"), ("correction", "retry"),
                 ("dead-letters", "list"), ("invariant", "list")):
        r = await agents(*args, "--help")
        assert r.code == 0 and "<bool>" not in r.out, (args, r.out)
