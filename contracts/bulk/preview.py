"""What a batch would do, before it is requested: each match's impact (the same BFS a
single dry run makes, contracts.impact), the conflicts between matches, and the sum.

The conflict rule: a match inside another match's subtree (found by that match's walk)
is *covered*. A revert of the outer one supersedes it, so a revert batch skips it (its
own revert would fail as superseded, or undo the outer one's replacement); an append
batch requests both (an append supersedes nothing) and still reports the overlap. A match
already superseded is skipped by a revert batch for the same reason. The blast radius is
the union of what the requested matches reach, so a decision two matches reach is
counted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import Field

from contracts.bulk.model import BulkItem, correction_id_for
from contracts.bulk.states import ItemState
from contracts.corrections.states import CorrectionMode
from contracts.impact.risk import RiskLevel, risk_level_for
from contracts.impact.summary import CorrectionImpact
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX

__all__ = ["BulkPreview", "Conflict", "MatchImpact", "aggregate", "conflicts", "plan_items"]

_RISK_ORDER = (RiskLevel.LOW, RiskLevel.MEDIUM, RiskLevel.HIGH)


@dataclass(frozen=True, slots=True)
class MatchImpact:
    """One match and what its correction would touch."""

    decision_id: str
    plan_id: str
    superseded: bool
    affected: tuple[str, ...]
    """Affected decisions in BFS order, the match first."""
    files: tuple[str, ...]
    child_plans: tuple[str, ...]
    seconds: float
    exceeded: bool
    """Its walk stopped at the corrections' bound: the counts are lower bounds."""

    @classmethod
    def of(cls, plan_id: str, superseded: bool, impact: CorrectionImpact) -> MatchImpact:
        return cls(impact.target_decision_id, plan_id, superseded,
                   tuple(impact.affected_decision_ids), tuple(impact.affected_files),
                   tuple(impact.affected_child_plan_ids),
                   impact.estimated_recompute_time_seconds, impact.exceeds_limit)

    @property
    def risk(self) -> RiskLevel:
        return risk_level_for(len(self.affected))


class Conflict(Frozen):
    decision_id: str = Field(description="The match inside another's subtree.")
    covered_by: str = Field(description="The match whose subtree holds it.")


def conflicts(matches: Iterable[MatchImpact]) -> list[Conflict]:
    """Every (inner, outer) pair of matches where the outer's walk reached the inner."""
    listed = list(matches)
    ids = {m.decision_id for m in listed}
    return [Conflict(decision_id=inner, covered_by=m.decision_id)
            for m in listed for inner in m.affected[1:] if inner in ids]


def plan_items(batch_id: str, mode: CorrectionMode, matches: Iterable[MatchImpact],
               refused: Mapping[str, str]) -> list[BulkItem]:
    """One item per match, newest first as found: PLANNED, or skipped with the reason
    (refused by scope, covered, superseded) when a revert batch must not request it."""
    listed = list(matches)
    covered = {c.decision_id: c.covered_by for c in conflicts(listed)}
    revert = mode is CorrectionMode.REVERT
    items = []
    for m in listed:
        state, note = ItemState.PLANNED, None
        if m.decision_id in refused:
            state, note = ItemState.REFUSED, refused[m.decision_id]
        elif revert and m.superseded:
            state, note = ItemState.SUPERSEDED, "already superseded"
        elif revert and m.decision_id in covered:
            state, note = ItemState.COVERED, f"inside the subtree of {covered[m.decision_id]}"
        items.append(BulkItem(decision_id=m.decision_id, plan_id=m.plan_id,
                              correction_id=correction_id_for(batch_id, m.decision_id),
                              state=state, note=note))
    return items


class BulkPreview(Frozen):
    """The sum a dry run of the whole filter answers with; nothing is written."""

    mode: CorrectionMode
    matches: int = Field(description="Decisions the filter matches.")
    plans: int = Field(description="Plans they belong to.")
    to_request: int = Field(description="Corrections the batch would request.")
    covered: int = Field(description="Revert: matches inside another match's subtree.")
    superseded: int = Field(description="Revert: matches already superseded.")
    refused: int = Field(description="Matches outside the operator's project scope.")
    affected_decisions: int = Field(description="Decisions the requested corrections "
                                    "reach, each counted once.")
    affected_files: int
    files: list[str] = Field(description=f"The first {INLINE_IDS_MAX} affected files.")
    child_plans: int
    risk: RiskLevel = Field(description="The highest risk of one requested correction.")
    risk_counts: dict[str, int] = Field(description="Requested corrections per risk.")
    estimated_recompute_time_seconds: float
    exceeded: int = Field(description="Matches whose walk stopped at the bound (their "
                          "applying would fail).")
    conflicts: list[Conflict] = Field(description=f"The first {INLINE_IDS_MAX} overlaps.")
    conflicts_count: int
    items: list[BulkItem] = Field(description="One per match: planned or why skipped.")


def aggregate(batch_id: str, mode: CorrectionMode, matches: Iterable[MatchImpact],
              refused: Mapping[str, str]) -> BulkPreview:
    listed = list(matches)
    items = plan_items(batch_id, mode, listed, refused)
    planned = {i.decision_id for i in items if i.state is ItemState.PLANNED}
    chosen = [m for m in listed if m.decision_id in planned]
    reached = {d for m in chosen for d in m.affected}
    files = list(dict.fromkeys(f for m in chosen for f in m.files))
    risks = {r.value: sum(1 for m in chosen if m.risk is r) for r in _RISK_ORDER}
    found = conflicts(listed)
    return BulkPreview(
        mode=mode, matches=len(listed), plans=len({m.plan_id for m in listed}),
        to_request=len(chosen), covered=_count(items, ItemState.COVERED),
        superseded=_count(items, ItemState.SUPERSEDED),
        refused=_count(items, ItemState.REFUSED), affected_decisions=len(reached),
        affected_files=len(files), files=files[:INLINE_IDS_MAX],
        child_plans=len({p for m in chosen for p in m.child_plans}),
        risk=max((m.risk for m in chosen), key=_RISK_ORDER.index, default=RiskLevel.LOW),
        risk_counts=risks,
        estimated_recompute_time_seconds=sum(m.seconds for m in chosen),
        exceeded=sum(1 for m in chosen if m.exceeded), conflicts=found[:INLINE_IDS_MAX],
        conflicts_count=len(found), items=items)


def _count(items: Iterable[BulkItem], state: ItemState) -> int:
    return sum(1 for i in items if i.state is state)
