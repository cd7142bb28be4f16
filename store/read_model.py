"""What operators read, computed once for every front end: `agents plan explain` and the
web console call the same functions, so a decision reads the same in a terminal and in
a browser.

Reads only, through the store's repositories and views; nothing here writes or
publishes. Results are frozen dataclasses of domain models: each front end renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.diff import CorrectionDiff, correction_diff
from contracts.corrections.record import Correction
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import is_ulid
from store.corrections import CorrectionRepository
from store.database import Document
from store.decisions import DecisionRepository
from store.plans import PlanRepository
from store.views import PlanCounts, TreeViews

MAX_PATH = 10_000
"""Ancestors followed at most when walking up to the root (a cycle in stored data ends it)."""
PLAN_CORRECTIONS_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Explained:
    """One decision as `agents plan explain` shows it."""

    decision: Decision
    path: list[Decision]
    """Its ancestors, root first."""
    children: list[Decision]
    dependents: list[Decision]
    child_plans: dict[str, PlanRecord]
    corrections: list[Correction]
    """Those that targeted it or produced it."""


async def plan_records(db: AsyncDatabase[Document], plan_ids: list[str]
                       ) -> dict[str, PlanRecord]:
    repo = PlanRepository(db)
    out = {}
    for plan_id in dict.fromkeys(plan_ids):
        record = await repo.get(plan_id)
        if record is not None:
            out[plan_id] = record
    return out


async def plan_corrections(db: AsyncDatabase[Document], plan_id: str) -> list[Correction]:
    return await CorrectionRepository(db).find(plan_id, limit=PLAN_CORRECTIONS_MAX)


async def explain(db: AsyncDatabase[Document], decision_id: str) -> Explained | None:
    """None when no such decision is recorded."""
    repo = DecisionRepository(db)
    d = await repo.get(decision_id)
    if d is None:
        return None
    path: list[Decision] = []
    seen = {d.decision_id}
    parent = d.parent_decision_id
    while parent is not None and parent not in seen and len(path) < MAX_PATH:
        p = await repo.get(parent)
        if p is None:
            break
        path.append(p)
        seen.add(parent)
        parent = p.parent_decision_id
    path.reverse()
    children = await repo.children(decision_id, current_only=False)
    dependents = await repo.get_many(d.downstream_decision_ids)
    plans = await plan_records(db, d.downstream_plan_ids)
    touching = [c for c in await plan_corrections(db, d.plan_id)
                if decision_id in (c.decision_id, c.new_decision_id)]
    return Explained(d, path, children, list(dependents.values()), plans, touching)


async def correction_diff_of(db: AsyncDatabase[Document], correction_id: str
                             ) -> CorrectionDiff | None:
    """What a correction changed (`agents correction diff`, the console's correction
    page); None when no such correction is recorded."""
    found = await CorrectionRepository(db).get(correction_id)
    if found is None:
        return None
    c = found.correction
    plans = PlanRepository(db)
    roots = [r.root_decision_id for p in c.child_plans_spawned
             if (r := await plans.get(p)) is not None and r.root_decision_id is not None]
    wanted = [*c.superseded_ids[:INLINE_IDS_MAX], *roots,
              *([c.new_decision_id] if c.new_decision_id else [])]
    decisions = await DecisionRepository(db).get_many(wanted)
    return correction_diff(c, decisions, roots)


# --- plans and IDs ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanSummary:
    root: Decision
    record: PlanRecord | None
    counts: PlanCounts


async def recent_plans(db: AsyncDatabase[Document], limit: int = 50,
                       before: str | None = None) -> list[PlanSummary]:
    """Newest plans first (by their root's ULID), with counts and their plan record."""
    views = TreeViews(db)
    roots = await views.recent_roots(limit, before)
    ids = [r.plan_id for r in roots]
    counts = await views.counts(ids)
    records = await plan_records(db, ids)
    return [PlanSummary(r, records.get(r.plan_id), counts.get(r.plan_id, PlanCounts()))
            for r in roots]


@dataclass(frozen=True, slots=True)
class Found:
    kind: Literal["plan", "decision", "correction", "none"]
    plan_id: str | None = None
    decision_id: str | None = None
    correction_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


async def find(db: AsyncDatabase[Document], any_id: str) -> Found:
    """What an ID names: a decision, a plan or a correction (ULIDs never collide)."""
    if not is_ulid(any_id):
        return Found("none")
    any_id = any_id.upper()
    d = await DecisionRepository(db).get(any_id)
    if d is not None:
        return Found("decision", plan_id=d.plan_id, decision_id=d.decision_id)
    if await TreeViews(db).plan_exists(any_id):
        return Found("plan", plan_id=any_id)
    c = await CorrectionRepository(db).get(any_id)
    if c is not None:
        return Found("correction", plan_id=c.correction.plan_id, correction_id=any_id)
    return Found("none")
