"""A plan's tree as it stood at some point, computed from the ledger itself: no
snapshots are kept (`tree_as_of`; what one correction changed is
`contracts.corrections.diff`).

"Then" is a `Cut`. A `SequenceCut` is exact: a plan's sequence numbers are assigned
by the ledger in recording order and never reused, and every correction writes one
decision into the plan (the replacement of a revert, the user_intervention of an
append), so "as of correction C" is "every decision whose sequence number is at most
that of C's new decision, less those superseded by a replacement numbered at most
that". A `TimeCut` is as good as the times it reads: a decision counts from its
`created_at` (which an agent may supply; the recorder stamps its receive time when
absent) and stops counting from its `superseded_at` (its replacement's `created_at`;
for data older than that field, the APPLIED transition of the correction that made
its replacement, else the replacement's own `created_at`, which the ledger stamps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.model import Decision


@dataclass(frozen=True, slots=True)
class SequenceCut:
    """The plan as it stood once its decision number `sequence` was recorded."""

    sequence: int


@dataclass(frozen=True, slots=True)
class TimeCut:
    """The plan as it stood at `at` (UTC), by the times the decisions carry."""

    at: datetime


Cut = SequenceCut | TimeCut


def applied_at(correction: Correction) -> datetime | None:
    """When the correction was applied: its transition to APPLIED; None if it was not."""
    for t in reversed(correction.history):
        if t.to_status is CorrectionStatus.APPLIED:
            return t.at
    return None


def cut_of_correction(correction: Correction, decisions: Mapping[str, Decision], *,
                      before: bool = False) -> SequenceCut:
    """The tree `correction` produced (`before`: the tree it was applied to).

    ValueError when it was not applied, or its new decision is not one of `decisions`
    (another plan's, or deleted): there is then no point of this plan to cut at.
    """
    if correction.status is not CorrectionStatus.APPLIED or correction.new_decision_id is None:
        raise ValueError(f"correction {correction.correction_id} is "
                         f"{correction.status.value}, not applied: it changed nothing")
    new = decisions.get(correction.new_decision_id)
    if new is None or new.sequence_number is None:
        raise ValueError(f"the decision {correction.new_decision_id} correction "
                         f"{correction.correction_id} wrote is not recorded in this plan")
    return SequenceCut(new.sequence_number - 1 if before else new.sequence_number)


def superseded_time(d: Decision, replacement: Decision | None,
                    applied: Mapping[str, datetime]) -> datetime | None:
    """When `d` stopped being current; None if it is current or nothing says when.

    `applied` maps a correction's new decision ID to its APPLIED time (`applied_at`),
    for decisions superseded before `superseded_at` was recorded.
    """
    if d.superseded_by is None:
        return None
    if d.superseded_at is not None:
        return d.superseded_at
    if d.superseded_by in applied:
        return applied[d.superseded_by]
    return replacement.created_at if replacement is not None else None


def _recorded(d: Decision, cut: Cut) -> bool:
    if isinstance(cut, SequenceCut):
        return d.sequence_number is not None and d.sequence_number <= cut.sequence
    return d.created_at <= cut.at


def _superseded(d: Decision, by_id: Mapping[str, Decision], cut: Cut,
                applied: Mapping[str, datetime]) -> bool:
    if d.superseded_by is None:
        return False
    replacement = by_id.get(d.superseded_by)
    if isinstance(cut, SequenceCut):
        # A replacement we cannot place (not among the decisions given) counts as
        # superseding it all along: it is not shown as current at any point.
        return (replacement is None or replacement.sequence_number is None
                or replacement.sequence_number <= cut.sequence)
    when = superseded_time(d, replacement, applied)
    return when is None or when <= cut.at


def tree_as_of(decisions: Iterable[Decision], cut: Cut,
               applied: Mapping[str, datetime] | None = None) -> list[Decision]:
    """The decisions of one plan that were current at `cut`, in sequence order.

    `decisions` is the whole plan, superseded ones included (the replacement of a
    superseded decision is read from it). The decisions returned are as stored now: a
    decision superseded after the cut still carries its `superseded_by`.
    """
    all_ = list(decisions)
    by_id = {d.decision_id: d for d in all_}
    applied = applied or {}
    kept = [d for d in all_
            if _recorded(d, cut) and not _superseded(d, by_id, cut, applied)]
    return sorted(kept, key=lambda d: (d.sequence_number is None, d.sequence_number or 0))
