"""A plan's tree as operators read it, computed once for every front end: one level of
a tree (the console opens a tree a level at a time), and the tree
as it was at a correction or a moment (`agents plan tree --as-of`, the console's
history view).

Reads only, through the read port (services/read_ports.py). Results are frozen
dataclasses of domain models: each front end renders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from contracts.corrections.as_of import (
    Cut,
    SequenceCut,
    TimeCut,
    applied_at,
    cut_of_correction,
    tree_as_of,
)
from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.shared.ids import is_ulid
from services.read_model import plan_corrections, plan_records
from services.read_ports import LedgerReads

TREE_READ_MAX = 10_000
"""Most decisions a tree as of a moment reads (and shows)."""

# --- the tree as it was ---------------------------------------------------------------


def moment_of(raw: str) -> str | datetime:
    """What `--as-of` and the console's `at` name: a correction ID (upper-cased) or a
    time in UTC (an ISO time without an offset is taken as UTC). ValueError otherwise."""
    if is_ulid(raw):
        return raw.upper()
    moment = datetime.fromisoformat(raw)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def cut_as_of(decisions: list[Decision], corrections: list[Correction], cut: Cut
              ) -> tuple[list[Decision], list[Correction]]:
    """The decisions current at `cut` and the corrections applied by then
    (`agents plan tree --as-of`, the console's tree as of a correction or a time)."""
    applied = {c.new_decision_id: t for c in corrections
               if c.new_decision_id is not None and (t := applied_at(c)) is not None}
    kept = tree_as_of(decisions, cut, applied)
    seq = {d.decision_id: d.sequence_number for d in decisions}

    def applied_by_then(c: Correction) -> bool:
        if c.status is not CorrectionStatus.APPLIED or c.new_decision_id is None:
            return False
        if isinstance(cut, SequenceCut):
            n = seq.get(c.new_decision_id)
            return n is not None and n <= cut.sequence
        t = applied.get(c.new_decision_id)
        return t is not None and t <= cut.at

    return kept, [c for c in corrections if applied_by_then(c)]


@dataclass(frozen=True, slots=True)
class TreeThen:
    cut: Cut
    decisions: list[Decision]
    """Current at the cut, in sequence order (as stored now: a later supersede shows)."""
    corrections: list[Correction]


async def tree_then(reads: LedgerReads, plan_id: str, at: str | datetime, *,
                    before: bool = False) -> TreeThen:
    """The plan's tree as of a correction of it (`before`: the tree it was applied to)
    or a UTC time. Reads what it shows: as of a correction, the decisions numbered up to
    its cut (and the replacements of those superseded since, to tell when); as of a
    time, the plan in sequence order; either way at most TREE_READ_MAX decisions.
    ValueError (its message for the operator) when the moment names nothing here."""
    cut: Cut
    if isinstance(at, datetime):
        if before:
            raise ValueError("'before' goes with a correction ID, not a time")
        cut = TimeCut(at)
    else:
        found = await reads.corrections.get(at)
        if found is None or found.correction.plan_id != plan_id:
            raise ValueError(f"no correction {at} is recorded for plan {plan_id}")
        new = found.correction.new_decision_id
        written = await reads.decisions.get_many([new] if new else [])
        cut = cut_of_correction(found.correction, {
            i: d for i, d in written.items() if d.plan_id == plan_id}, before=before)
    decisions = await reads.decisions.up_to(
        plan_id, cut.sequence if isinstance(cut, SequenceCut) else None, TREE_READ_MAX)
    ids = {d.decision_id for d in decisions}
    later = await reads.decisions.get_many(
        {d.superseded_by for d in decisions if d.superseded_by and d.superseded_by not in ids})
    replacements = [r for r in later.values() if r.plan_id == plan_id]
    corrections = await plan_corrections(reads, plan_id)
    kept, applied = cut_as_of([*decisions, *replacements], corrections, cut)
    return TreeThen(cut, kept, applied)


# --- plans and tree levels ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TreeNode:
    decision: Decision
    child_count: int
    child_plans: dict[str, PlanRecord]
    corrections: list[Correction]
    """Corrections that targeted this decision or produced it."""


@dataclass(frozen=True, slots=True)
class TreeLevel:
    plan_id: str
    parent: str | None
    nodes: list[TreeNode]
    next_after: int | None
    """The sequence number to ask `after` for the next page; None when this was the last."""


async def tree_level(reads: LedgerReads, plan_id: str, parent: str | None, *,
                     after: int | None = None, limit: int = 100,
                     superseded: bool = False) -> TreeLevel:
    found = await reads.views.level(plan_id, parent, after=after, limit=limit + 1,
                                    superseded=superseded)
    more = len(found) > limit
    found = found[:limit]
    counts = await reads.views.child_counts([d.decision_id for d in found],
                                            superseded=superseded)
    plans = await plan_records(reads, [p for d in found for p in d.downstream_plan_ids])
    ids = {d.decision_id for d in found}
    marks: dict[str, list[Correction]] = {}
    if ids:
        for c in await plan_corrections(reads, plan_id):
            for target in {c.decision_id, c.new_decision_id or ""} & ids:
                marks.setdefault(target, []).append(c)
    nodes = [TreeNode(d, counts.get(d.decision_id, 0),
                      {p: plans[p] for p in d.downstream_plan_ids if p in plans},
                      marks.get(d.decision_id, []))
             for d in found]
    last = found[-1].sequence_number if more and found else None
    return TreeLevel(plan_id, parent, nodes, last)
