"""What the operator's reads cost on a large plan: each reads what it shows, so its reads,
documents and memory stay the same whether the plan holds 3,000 decisions or 100,000
(`slow`): a decision's panel (`explain`), the tree as of a correction, a page of a tree
level, the plans' counts, `agents status`, a runner's next correction, a page of the
recovery sweep, and a dry run past the limit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.corrections.changes import Changes
from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.rules import Rule
from services.archive.writer import Archive
from services.corrections.service import CorrectionService
from services.read_model import CHILDREN_SHOWN, MAX_PATH, explain
from services.tree_model import tree_level, tree_then
from store.correction_store import CorrectionStore
from store.database import DECISIONS, PLANS, Document
from store.decisions import to_document
from store.leases import Leases
from store.mongo_store import MongoStore
from store.status import ledger_status
from tests.bulk import INSERT_CHUNK
from tests.integration.bounds_support import Commands, Cost, cost
from tests.unit.test_impact import dec, uid
from workers.metrics import GAUGES_ROLE, Metrics
from workers.streams import ensure_streams

pytestmark = pytest.mark.store

MB = 1024 * 1024
NOW = datetime(2026, 12, 1, tzinfo=UTC)
EARLY = 50
"""Decisions recorded before the revert the tree is read as of."""


@dataclass
class Scene:
    plan_id: str
    deep: str
    """The last of a chain of decisions, with every other decision of the plan under it."""
    correction_id: str
    """A revert applied when the plan held EARLY + 1 decisions."""
    wide_child: str


async def _load(db: AsyncDatabase[Document], decisions: list[Decision], first: int) -> None:
    numbered = [d.model_copy(update={"sequence_number": first + i})
                for i, d in enumerate(decisions)]
    for i in range(0, len(numbered), INSERT_CHUNK):
        await db[DECISIONS].insert_many([to_document(d) for d in numbered[i:i + INSERT_CHUNK]],
                                        ordered=False)
    await db[PLANS].update_one({"_id": numbered[0].plan_id},
                               {"$max": {"next_sequence": first + len(numbered)},
                                "$setOnInsert": {"created_at": NOW, "status": "active"}},
                               upsert=True)


async def scene(db: AsyncDatabase[Document], nc: nats.NATS, tmp: Path, size: int,
                depth: int) -> Scene:
    """A root, a leaf reverted early on, then a chain `depth` deep with the rest of the
    plan's `size` decisions as children of its last link."""
    plan = uid(4242)
    root = dec(1, None, plan=plan)
    leaf = dec(2, 1, plan=plan, type_=DecisionType.TOOL_INVOCATION, at=1)
    early = [dec(3 + i, 1, plan=plan, type_=DecisionType.TOOL_INVOCATION, at=1)
             for i in range(EARLY - 2)]
    await _load(db, [root, leaf, *early], 0)
    await ensure_streams(nc.jetstream())
    (tmp / "artifacts").mkdir(exist_ok=True)
    svc = CorrectionService(CorrectionStore.open(db), JetStreamPublisher(nc),
                            Archive(tmp / "archive", tmp / "artifacts"))
    req = CorrectionRequest(plan_id=plan, decision_id=leaf.decision_id,
                            mode=CorrectionMode.REVERT, guidance="Use the gateway.",
                            requested_by="alice")
    await svc.request_correction(req, arrival=1)
    assert await svc.run_plan(plan)
    chain = [dec(1_000_000 + i, (1_000_000 + i - 1) if i else 1, plan=plan,
                 type_=DecisionType.STRATEGY_CHOICE, at=2) for i in range(depth)]
    wide = [dec(2_000_000 + i, 1_000_000 + depth - 1, plan=plan,
                type_=DecisionType.TOOL_INVOCATION, at=3) for i in range(size - depth - EARLY)]
    await _load(db, [*chain, *wide], EARLY + 1)
    return Scene(plan, chain[-1].decision_id, req.correction_id, wide[0].decision_id)


@dataclass
class Costs:
    explain_deep: Cost
    explain_wide: Cost
    as_of: Cost
    level: Cost
    counts: Cost
    status: Cost
    heads: Cost
    sweep: Cost
    dry_run: Cost

    def rows(self) -> str:
        return "\n".join(f"  {name:<14} {c.reads:>5} reads {c.documents:>7,} documents "
                         f"{c.peak_bytes / MB:>6.1f} MiB"
                         for name, c in vars(self).items())


async def measure(db: AsyncDatabase[Document], commands: Commands, s: Scene) -> Costs:
    store = MongoStore(db)
    correction_store = CorrectionStore.open(db)
    # A queue of pending corrections on one plan: the runner reads only its head.
    for i in range(300):
        c = Correction.from_request(CorrectionRequest(
            plan_id=uid(5151), decision_id=uid(9), mode=CorrectionMode.APPEND,
            guidance="more", requested_by="bob"), NOW)
        await correction_store.writer.commit(Changes(c, None, arrival=10 + i), NOW)
    found, deep = await cost(commands, lambda: explain(store, s.deep))
    assert found is not None and found.path_cut and len(found.path) == MAX_PATH
    assert len(found.children) == CHILDREN_SHOWN and found.children_count > CHILDREN_SHOWN
    _, wide = await cost(commands, lambda: explain(store, s.wide_child))
    then, as_of = await cost(commands, lambda: tree_then(store, s.plan_id, s.correction_id))
    assert len(then.decisions) == EARLY  # the root, the replacement and the 48 others
    page, level = await cost(commands, lambda: tree_level(store, s.plan_id, s.deep,
                                                          limit=100))
    assert len(page.nodes) == 100 and page.next_after is not None
    _, counts = await cost(commands, lambda: store.views.counts([s.plan_id]))
    _, status = await cost(commands, lambda: ledger_status(db, NOW))
    heads, head = await cost(commands, lambda: correction_store.corrections.heads(uid(5151)))
    assert len(heads) == 1
    _, sweep = await cost(commands,
                          lambda: correction_store.corrections.plans_with_unfinished(None, 100))
    impact, dry = await cost(commands, lambda: correction_store.impact.impact(s.deep, 1000))
    assert impact.exceeds_limit
    return Costs(deep, wide, as_of, level, counts, status, head, sweep, dry)




def bounded(c: Costs) -> None:
    """The same bounds whatever the plan's size."""
    for name, spent in vars(c).items():
        assert spent.peak_bytes < 30 * MB, name
    assert c.explain_deep.reads <= MAX_PATH + 10
    assert c.explain_deep.documents <= MAX_PATH + CHILDREN_SHOWN + 10
    assert c.as_of.documents <= EARLY + 20
    assert c.level.documents <= 2 * 101 + 10
    assert c.status.documents <= 10 and c.heads.documents <= 3
    assert c.sweep.documents <= 3 * 100
    assert c.dry_run.documents <= 1000 + 1500


async def _run(counted: tuple[AsyncDatabase[Document], Commands], nc: nats.NATS,
               tmp_path: Path, size: int, depth: int) -> None:
    db, commands = counted
    s = await scene(db, nc, tmp_path, size, depth)
    costs = await measure(db, commands, s)
    print(f"\na {size:,}-decision plan (a chain {depth:,} deep, the rest under its last "
          f"link):\n{costs.rows()}")
    bounded(costs)


async def test_reads_on_a_plan_of_3000_decisions_stay_within_their_bounds(
        counted: tuple[AsyncDatabase[Document], Commands], nc: nats.NATS,
        tmp_path: Path) -> None:
    await _run(counted, nc, tmp_path, 3_000, 300)


@pytest.mark.slow
async def test_reads_on_a_plan_of_100000_decisions_stay_within_the_same_bounds(
        counted: tuple[AsyncDatabase[Document], Commands], nc: nats.NATS,
        tmp_path: Path) -> None:
    await _run(counted, nc, tmp_path, 100_000, 2_000)


async def test_one_replica_samples_the_ledger_gauges(db: AsyncDatabase[Document],
                                                      nc: nats.NATS) -> None:
    """The sampling replica holds role:gauges; the others show none of the gauges, so a
    sum over replicas counts once, and the counts cost one replica's reads."""
    await db.dead_letters.insert_one({"_id": "DECISIONS:1", "errors": [
        {"rule": Rule.NOT_JSON.value}, {"rule": Rule.NON_EMPTY.value}]})
    a, b = Metrics(), Metrics()
    leases = Leases(db, 5)
    js = nc.jetstream()
    assert await a.sample_if_leading(js, db, [], leases=leases, owner="a")
    assert not await b.sample_if_leading(js, db, [], leases=leases, owner="b")
    assert b"ledger_gauges_sampler 1.0" in a.render()
    assert b'ledger_dead_letters{rule="not_json"} 1.0' in a.render()
    assert b"ledger_gauges_sampler 0.0" in b.render()
    assert b"ledger_dead_letters{" not in b.render()
    await leases.release(GAUGES_ROLE, "a")  # a stopped: b takes over at its next round
    assert await b.sample_if_leading(js, db, [], leases=leases, owner="b")
