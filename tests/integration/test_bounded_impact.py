"""The impact walk against the store reads no further than its limit: it agrees with the
plain BFS whenever the impact fits the limit, says it is over the limit whenever it does
not, and a level far wider than the limit costs the limit plus a few batches, in
documents, reads and memory."""

from __future__ import annotations

import random

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from store.database import Document
from store.decisions import to_document
from store.impact import ImpactReader
from store.impact_children import READ_BATCH
from tests.bulk import load_plan
from tests.impact_graph import ImpactGraph, compute_impact
from tests.integration.bounds_support import Commands, cost
from tests.unit.test_impact import NON_ROOT, dec, uid

pytestmark = pytest.mark.store

MB = 1024 * 1024




def random_graph(rng: random.Random, k: int) -> tuple[list[Decision], str]:
    """Up to 40 decisions over three plans, parents, declared dependents (cycles too),
    child plans, superseded ones; IDs of their own (graph `k`)."""
    base = 100_000 * (k + 1)
    plans = [uid(base + 90_001 + p) for p in range(3)]
    n = rng.randint(1, 40)
    out = []
    for i in range(n):
        parent = rng.randrange(i) if i and rng.random() < 0.9 else None
        out.append(dec(
            base + i, None if parent is None else base + parent, plan=rng.choice(plans),
            type_=None if parent is None else rng.choice(NON_ROOT),
            deps=[base + rng.randrange(n + 2) for _ in range(rng.randint(0, 2))],
            plans=rng.sample(plans, rng.randint(0, 1)), seq=rng.randint(0, 5),
            superseded=rng.random() < 0.15, at=rng.randint(-10, 1000)))
    return out, uid(base + rng.randrange(n))


async def test_the_bounded_walk_agrees_with_the_plain_bfs_or_says_it_is_over(
        mongo_client: AsyncMongoClient[Document], db_name: str) -> None:
    # Random graphs break the recorder's rules (two roots in a plan, repeated sequence
    # numbers): a database with only the index the walk reads by.
    db = mongo_client[db_name]
    await db.decisions.create_index("parent_decision_id", name="children")
    rng = random.Random(26)
    reader = ImpactReader(db)
    checked = over = 0
    for k in range(40):
        decisions, target = random_graph(rng, k)
        await db.decisions.insert_many([to_document(d) for d in decisions])
        full = compute_impact(target, ImpactGraph.from_decisions(decisions))
        for limit in {0, 1, 2, rng.randint(0, 40), full.affected_count,
                      full.affected_count - 1}:
            if limit < 0:
                continue
            got = await reader.impact(target, limit)
            if full.affected_count <= limit:
                assert got == full, (k, limit)
            else:
                assert got.exceeds_limit, (k, limit)
                assert got.affected_count <= limit + 1
                over += 1
            checked += 1
    assert checked > 100 and over > 20


def wide_plan(children: int) -> tuple[list[Decision], str]:
    """A root, a strategy under it, and `children` decisions under the strategy."""
    root = dec(1, None, plan=uid(42))
    strategy = dec(2, 1, plan=uid(42), type_=DecisionType.STRATEGY_CHOICE, at=1)
    kids = [dec(10 + i, 2, plan=uid(42), type_=DecisionType.TOOL_INVOCATION, at=2)
            for i in range(children)]
    return [root, strategy, *kids], strategy.decision_id


async def _level_over_the_limit(db: AsyncDatabase[Document], commands: Commands,
                                children: int, limit: int) -> None:
    decisions, target = wide_plan(children)
    await load_plan(db, decisions)
    reader = ImpactReader(db)
    impact, spent = await cost(commands, lambda: reader.impact(target, limit))
    print(f"\n{children:,} children, limit {limit:,}: {spent.reads} reads, "
          f"{spent.documents:,} documents, peak {spent.peak_bytes / MB:.1f} MiB")
    assert impact.exceeds_limit and impact.affected_count <= limit + 1
    # The limit plus a few batches, whatever the width: never the level.
    assert spent.documents <= limit + 1 + 2 * READ_BATCH
    assert spent.reads <= 4 + (limit + 2 * READ_BATCH) // READ_BATCH
    assert spent.peak_bytes < 40 * MB
    # Under the limit the same level is read whole, and agrees with the plain BFS.
    small = await reader.impact(decisions[2].decision_id, limit)
    assert small.affected_count == 1 and not small.exceeds_limit


async def test_a_level_wider_than_the_limit_costs_the_limit(
        counted: tuple[AsyncDatabase[Document], Commands]) -> None:
    db, commands = counted
    await _level_over_the_limit(db, commands, 2_000, 100)


@pytest.mark.slow
async def test_a_level_of_50000_children_costs_the_limit_not_the_level(
        counted: tuple[AsyncDatabase[Document], Commands]) -> None:
    db, commands = counted
    await _level_over_the_limit(db, commands, 50_000, 1_000)


async def test_a_declared_dependent_with_a_wide_subtree_stops_the_walk_too(
        db: AsyncDatabase[Document]) -> None:
    """A dependent the walk may refuse: its children are cut at the limit too, and count
    only if the walk follows it."""
    plan = uid(77)
    root = dec(1, None, plan=plan)
    target = dec(2, 1, plan=plan, deps=[3], at=1)
    dependent = dec(3, 1, plan=plan, at=2)
    kids = [dec(10 + i, 3, plan=plan, type_=DecisionType.TOOL_INVOCATION, at=3)
            for i in range(300)]
    await load_plan(db, [root, target, dependent, *kids])
    reader = ImpactReader(db)
    over = await reader.impact(target.decision_id, 50)
    assert over.exceeds_limit
    whole = await reader.impact(target.decision_id, 1000)
    assert whole.affected_count == 302 and not whole.exceeds_limit
    # Refused when it was recorded before the target (its subtree is not the target's):
    # its 300 children were cut at the limit, and do not count.
    later = dec(4, 1, plan=plan, deps=[3], at=1).model_copy(update={"sequence_number": 10_000})
    await db.decisions.insert_one(to_document(later))
    refused = await reader.impact(later.decision_id, 50)
    assert refused.affected_count == 1 and not refused.exceeds_limit

