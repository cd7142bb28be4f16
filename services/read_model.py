"""What operators read about one decision, one correction or one ID, computed once for
every front end: `agents plan explain` and the web console call the same functions, so a
decision reads the same in a terminal and in a browser.

Reads only, through the read port (services/read_ports.py); nothing here writes or
publishes. Results are frozen dataclasses of domain models: each front end renders
them. A plan's tree, a level or a moment at a time, is services/tree_model.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from contracts.corrections.diff import CorrectionDiff, correction_diff
from contracts.corrections.record import Correction
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.views import IdKind
from services.id_lookup import resolve
from services.read_ports import LedgerReads

MAX_PATH = 100
"""Ancestors read at most when walking up to the root, one read each (a cycle in stored
data ends it too): a decision 10,000 levels deep shows its nearest 100 (`path_cut`)."""
CHILDREN_SHOWN = 100
"""Children a decision's panel lists, first in sequence order (`children_count` says how
many it has)."""
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
    path_cut: bool = False
    """The path holds only the nearest MAX_PATH ancestors, not the root."""
    children_count: int = 0
    """All its children, `children` being the first CHILDREN_SHOWN."""
    recorded_by: str | None = None
    """The principal that signed it, as the recorder verified it (None: unverified)."""


async def plan_records(reads: LedgerReads, plan_ids: list[str]) -> dict[str, PlanRecord]:
    out = {}
    for plan_id in dict.fromkeys(plan_ids):
        record = await reads.plans.get(plan_id)
        if record is not None:
            out[plan_id] = record
    return out


async def plan_corrections(reads: LedgerReads, plan_id: str) -> list[Correction]:
    return await reads.corrections.find(plan_id, limit=PLAN_CORRECTIONS_MAX)


async def path_to(reads: LedgerReads, d: Decision) -> list[Decision]:
    """The decision's ancestors, root first."""
    path: list[Decision] = []
    seen = {d.decision_id}
    parent = d.parent_decision_id
    while parent is not None and parent not in seen and len(path) < MAX_PATH:
        p = await reads.decisions.get(parent)
        if p is None:
            break
        path.append(p)
        seen.add(parent)
        parent = p.parent_decision_id
    path.reverse()
    return path


async def explain(reads: LedgerReads, decision_id: str) -> Explained | None:
    """None when no such decision is recorded. Reads what it shows: the path up to
    MAX_PATH ancestors, the first CHILDREN_SHOWN children and their count, the declared
    dependents and child plans, and the corrections naming it (by index), whatever the
    plan holds."""
    d = await reads.decisions.get(decision_id)
    if d is None:
        return None
    path = await path_to(reads, d)
    children = await reads.decisions.children(decision_id, current_only=False,
                                              limit=CHILDREN_SHOWN)
    count = (len(children) if len(children) < CHILDREN_SHOWN else
             await reads.decisions.count_children(decision_id, current_only=False))
    dependents = await reads.decisions.get_many(d.downstream_decision_ids)
    plans = await plan_records(reads, d.downstream_plan_ids)
    touching = await reads.corrections.touching(decision_id)
    cut = len(path) >= MAX_PATH and path[0].parent_decision_id is not None
    return Explained(d, path, children, list(dependents.values()), plans, touching,
                     path_cut=cut, children_count=count,
                     recorded_by=await reads.decisions.recorded_by(decision_id))


async def superseded_reason(reads: LedgerReads, d: Decision) -> str:
    """Why a superseded decision cannot be corrected, and what to correct instead: its
    own replacement when a revert of it replaced it; when it went with an ancestor's
    revert, the decision that replaced that ancestor is no replacement of its own."""
    by = d.superseded_by_correction
    found = await reads.corrections.get(by) if by else None
    c = found.correction if found else None
    if c is None or c.decision_id == d.decision_id:
        via = f" by correction {by}" if by else ""
        return (f"decision {d.decision_id} is already superseded{via}: it was replaced by "
                f"{d.superseded_by}; correct {d.superseded_by} instead")
    return (f"decision {d.decision_id} is superseded: correction {c.correction_id} reverted "
            f"its ancestor {c.decision_id} (replaced by {c.new_decision_id}), and it went "
            f"with it; it has no replacement of its own. Correct a current decision of plan "
            f"{d.plan_id} (agents plan tree {d.plan_id})")


async def correction_diff_of(reads: LedgerReads, correction_id: str) -> CorrectionDiff | None:
    """What a correction changed (`agents correction diff`, the console's correction
    page); None when no such correction is recorded."""
    found = await reads.corrections.get(correction_id)
    if found is None:
        return None
    c = found.correction
    roots = [r.root_decision_id for p in c.child_plans_spawned
             if (r := await reads.plans.get(p)) is not None and r.root_decision_id is not None]
    wanted = [*c.superseded_ids[:INLINE_IDS_MAX], *roots,
              *([c.new_decision_id] if c.new_decision_id else [])]
    decisions = await reads.decisions.get_many(wanted)
    return correction_diff(c, decisions, roots)


@dataclass(frozen=True, slots=True)
class Found:
    kind: Literal["plan", "decision", "correction", "none"]
    plan_id: str | None = None
    decision_id: str | None = None
    correction_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


FINDABLE = (IdKind.PLAN, IdKind.DECISION, IdKind.CORRECTION)


async def find(reads: LedgerReads, raw: str) -> Found:
    """What an ID or the last characters of one names: a decision, a plan or a
    correction (ULIDs never collide). IdNotUsable for text that is no ID or suffix, or
    a suffix several IDs end with."""
    any_id = await resolve(reads, raw, FINDABLE)
    d = await reads.decisions.get(any_id)
    if d is not None:
        return Found("decision", plan_id=d.plan_id, decision_id=d.decision_id)
    if await reads.views.plan_exists(any_id):
        return Found("plan", plan_id=any_id)
    c = await reads.corrections.get(any_id)
    if c is not None:
        return Found("correction", plan_id=c.correction.plan_id, correction_id=any_id)
    return Found("none")
