"""`agents bulk` against the real servers and workers, over a few dozen plans (a few
hundred in the slow run, AT_SCALE): the preview's counts and conflicts, the bound, a
batch requested and followed to its end, a re-run that corrects nothing twice, a cancel
half-way, an operator out of scope."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from contracts.bulk.model import BulkBatch, BulkFilter
from contracts.bulk.states import BatchState, ItemState
from contracts.corrections.states import CorrectionMode
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from services.bulk import SEND_CHUNK, BulkService
from store.database import Document
from store.mongo_store import MongoStore
from tests.conftest import Workers
from tests.integration.bulk_support import load_plans
from tests.integration.cli_support import Agents, agents, assert_one_line_error, cli_workers
from tests.trust_support import member, write_principals, write_seed
from workers.streams import ensure_streams

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e

WORDS = "leftpad yanked"
"""The filter every test asks for: both bad decisions of every loaded plan."""


AT_SCALE = pytest.mark.slow
"""The same test over a few hundred plans: `scripts/test -m slow` (.ci/run) runs it; the
default run keeps a few chunks' worth, which takes every path (the bulk service pages,
chunks and walks the same way at any count) in under half the time (alone: 3.7 s for
60 plans against 16.6 s for 300 to preview; 9.7 s for 40 against 24.8 s for 120 to
correct)."""


@pytest.mark.parametrize("n", [60, pytest.param(300, marks=[AT_SCALE, pytest.mark.long])])
async def test_preview_counts_conflicts_bound_and_hostile_filters(
        agents: Agents, db: AsyncDatabase[Document], n: int) -> None:
    loaded = await load_plans(db, n)
    p = (await agents.ok("bulk", "preview", WORDS, "--json")).json
    assert (p["matches"], p["plans"]) == (2 * n, n)
    assert (p["to_request"], p["covered"], p["conflicts_count"]) == (n, n, n)
    # Each outer revert reaches itself, the implementation and the inner match.
    # Files: each plan's own, and the src/app.py the factory gives every decision.
    assert p["affected_decisions"] == 3 * n and p["affected_files"] == n + 1
    assert p["risk"] == "low" and p["risk_counts"]["low"] == n
    covered = {c["decision_id"]: c["covered_by"] for c in p["conflicts"]}
    for inner, outer in zip(loaded.inner, loaded.outer, strict=True):
        assert covered.get(inner, outer) == outer
    states = {i["decision_id"]: i["state"] for i in p["items"]}
    assert {states[d] for d in loaded.outer} == {"planned"}
    assert {states[d] for d in loaded.inner} == {"covered"}

    appended = (await agents.ok("bulk", "preview", WORDS, "--mode", "append", "--guidance",
                                "Use the maintained fork.", "--json")).json
    assert (appended["to_request"], appended["conflicts_count"]) == (2 * n, n)
    narrowed = (await agents.ok("bulk", "preview", WORDS, "--type", "tool_invocation",
                                "--json")).json
    assert (narrowed["matches"], narrowed["to_request"], narrowed["conflicts_count"]) == \
        (n, n, 0)
    text = (await agents.ok("bulk", "preview", WORDS)).out
    for line in (f"matches: {2 * n} decision(s) in {n} plan(s)", f"would request: {n}",
                 f"conflicts: {n}", f"affected files: {n + 1}", "nothing was changed"):
        assert line in text, line

    under = str(2 * n - 1)
    assert_one_line_error(await agents("bulk", "preview", WORDS,
                                       env={"BULK_MAX_MATCHES": under}), 1,
                          f"matches more than {under} decisions (BULK_MAX_MATCHES)")
    assert_one_line_error(await agents("bulk", "request", WORDS, "--reason", "r",
                                       env={"BULK_MAX_MATCHES": under}), 1,
                          f"matches more than {under} decisions")
    for hostile in ('{"$where": "sleep(1000)"}', ".*", "\ud800"):
        assert_one_line_error(await agents("bulk", "preview", hostile), 1,
                              "matches no decision")
    assert_one_line_error(await agents("bulk", "preview", "--path", '{"$ne": null}'), 1,
                          "matches no decision")
    assert await db.bulk_batches.count_documents({}) == 0
    assert await db.corrections.count_documents({}) == 0


async def _settled(agents: Agents, batch_id: str, timeout: float = 300) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            shown = (await agents.ok("bulk", "show", batch_id, "--json")).json
            if shown["state"] not in ("requested", "running"):
                return shown
            await asyncio.sleep(1)


@pytest.mark.long  # 20-70 s: dealt first, so no worker ends the run on it
@pytest.mark.parametrize("n", [2 * SEND_CHUNK, pytest.param(6 * SEND_CHUNK, marks=AT_SCALE)])
async def test_request_follows_every_correction_to_its_end_and_reruns_are_idempotent(
        cli_workers: Workers, agents: Agents, db: AsyncDatabase[Document], n: int) -> None:
    loaded = await load_plans(db, n)
    batch_id = new_id()
    first = (await agents.ok("bulk", "request", WORDS, "--reason", "yanked release",
                             "--guidance", "Use the maintained fork.",
                             "--batch-id", batch_id, "--json")).json
    assert first["batch_id"] == batch_id and len(first["items"]) == 2 * n
    done = await _settled(agents, batch_id)
    assert done["state"] == "completed", done["counts"]
    assert done["counts"] == {"covered": n, "applied": n}
    for d in loaded.outer:
        assert (await db.decisions.find_one({"_id": d}))["superseded_by"] is not None
    assert await db.corrections.count_documents({"status": "applied"}) == n

    again = await agents.ok("bulk", "request", WORDS, "--reason", "yanked release",
                            "--guidance", "Use the maintained fork.", "--batch-id", batch_id)
    assert f"bulk batch {batch_id} requested" in again.out
    await asyncio.sleep(2)
    assert await db.corrections.count_documents({}) == n
    assert_one_line_error(await agents("bulk", "request", WORDS, "--reason", "r",
                                       "--batch-id", batch_id), 1,
                          "requested with another filter, mode or guidance")
    listed = (await agents.ok("bulk", "list", "--json")).json["batches"]
    assert [b["batch_id"] for b in listed] == [batch_id]
    assert "completed" in (await agents.ok("bulk", "show", batch_id[-6:])).out
    assert_one_line_error(await agents("bulk", "cancel", batch_id), 1,
                          f"bulk batch {batch_id} is completed")
    # Nothing matches any more among the current decisions: a new batch has nothing to do.
    assert_one_line_error(await agents("bulk", "preview", WORDS, "--state", "current"), 1,
                          "matches no decision")


class CancelAfterFirstChunk:
    """The operator's client, which cancels the batch (from another service over its own
    connection, as a second operator would) once the first chunk was sent."""

    def __init__(self, ops: CorrectionClient, other: BulkService, batch_id: str) -> None:
        self.ops, self.other, self.batch_id = ops, other, batch_id
        self.sent = 0
        self.cancels: int | None = None

    async def request(self, *args: Any, **kwargs: Any) -> str:
        self.sent += 1
        cid = await self.ops.request(*args, **kwargs)
        if self.sent == SEND_CHUNK:
            _, self.cancels = await self.other.cancel(self.batch_id, self.ops, "stop")
        return cid

    async def cancel(self, correction_id: str, plan_id: str, reason: str | None = None
                     ) -> None:
        await self.ops.cancel(correction_id, plan_id, reason)


async def _ended(service: BulkService, batch_id: str) -> BulkBatch:
    """The batch once every item settled (three minutes at most: a loaded machine)."""
    for _ in range(360):
        now = await service.refresh(batch_id)
        if now.settled:
            return now
        await asyncio.sleep(0.5)
    raise AssertionError(f"batch {batch_id} did not settle: {now.counts()}")


def _service(uri: str, db_name: str) -> BulkService:
    store = MongoStore.connect(uri, db_name)
    return BulkService(store, store.bulk, bound=500, scan_max=2000, max_decisions=10_000)


async def test_a_cancel_half_way_stops_the_requests_and_undoes_nothing(
        cli_workers: Workers, nc: nats.NATS, mongo_uri: str, db_name: str,
        db: AsyncDatabase[Document]) -> None:
    await load_plans(db, 150)
    one, two = _service(mongo_uri, db_name), _service(mongo_uri, db_name)
    where = BulkFilter(text=WORDS, decision_type=None)
    batch = await one.create(where, CorrectionMode.REVERT, None, "halt", batch_id=new_id(),
                             identity=None, requested_by="tester")
    sender = CancelAfterFirstChunk(CorrectionClient(nc, requested_by="tester"), two,
                                   batch.batch_id)
    after = await one.send(batch, sender)
    assert after.state is BatchState.CANCELLED
    assert sender.sent == SEND_CHUNK and sender.cancels is not None
    counts = after.counts()
    assert counts["not_requested"] == 150 - SEND_CHUNK and counts["covered"] == 150
    now = await _ended(one, batch.batch_id)
    ended = [i.state for i in now.items if i.state not in (ItemState.COVERED,
                                                           ItemState.NOT_REQUESTED)]
    assert len(ended) == SEND_CHUNK
    assert set(ended) <= {ItemState.APPLIED, ItemState.CANCELLED}
    assert now.state is BatchState.CANCELLED
    # Applied ones stay applied; nothing past the first chunk was ever requested.
    assert await db.corrections.count_documents({}) == SEND_CHUNK
    assert await db.corrections.count_documents({"status": "applied"}) == \
        ended.count(ItemState.APPLIED)


ALICE = member("alice", Role.OPERATOR, "billing")
AGENT = member("billing-agent", Role.AGENT)


async def test_matches_outside_the_operators_projects_are_refused_item_by_item(
        agents: Agents, nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Any) -> None:
    await ensure_streams(nc.jetstream())
    billing = await load_plans(db, 30, project="billing")
    other = await load_plans(db, 20, project="other")
    principals = write_principals(tmp_path / "principals.toml", ALICE, AGENT)
    as_alice = {"LEDGER_PRINCIPALS": str(principals),
                "NATS_NKEY_SEED": str(write_seed(tmp_path / "alice.seed", ALICE))}
    p = (await agents.ok("bulk", "preview", WORDS, "--json", env=as_alice)).json
    assert (p["matches"], p["refused"], p["to_request"]) == (100, 40, 30)
    notes = {i["decision_id"]: i for i in p["items"]}
    for d in other.outer + other.inner:
        assert notes[d]["state"] == "refused"
        assert "operator_scope" in notes[d]["note"] and "project other" in notes[d]["note"]
    assert {notes[d]["state"] for d in billing.outer} == {"planned"}

    as_agent = {**as_alice, "NATS_NKEY_SEED": str(write_seed(tmp_path / "a.seed", AGENT))}
    assert_one_line_error(await agents("bulk", "request", WORDS, "--reason", "r",
                                       env=as_agent), 1, "the bulk correction is refused")
    assert await db.bulk_batches.count_documents({}) == 0
