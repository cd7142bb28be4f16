"""A plan's history, computed from the ledger itself: no snapshots are kept.

Two questions an operator asks after a correction, answered by pure functions here
(the CLI only loads what they read):

- what did the tree look like then? (`tree_as_of`)
- what did this correction change? (`correction_diff`)

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import Field

from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.corrections.write_sets import MANIFEST_NAME
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid
from contracts.shared.rules import EchoText

__all__ = [
    "CorrectionDiff",
    "Cut",
    "DecisionBrief",
    "SequenceCut",
    "TimeCut",
    "applied_at",
    "correction_diff",
    "cut_of_correction",
    "superseded_time",
    "tree_as_of",
]


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


# --- what one correction changed ---------------------------------------------------


class DecisionBrief(Frozen):
    """A decision named in a diff; only its ID when it is no longer recorded."""

    decision_id: Ulid = Field(description="The decision.")
    plan_id: Ulid | None = Field(default=None, description="Its plan.")
    decision_type: DecisionType | None = Field(default=None, description="Its type.")
    sequence_number: int | None = Field(default=None, description="Its sequence number.")
    chosen_option: EchoText | None = Field(default=None, description="Its choice (cut short).")

    @classmethod
    def of(cls, decision_id: str, d: Decision | None) -> DecisionBrief:
        if d is None:
            return cls(decision_id=decision_id)
        return cls(decision_id=d.decision_id, plan_id=d.plan_id,
                   decision_type=d.decision_type, sequence_number=d.sequence_number,
                   chosen_option=d.chosen_option)


class CorrectionDiff(Frozen):
    """What one correction changed, as `agents correction diff` prints it.

    Lists hold their first INLINE_IDS_MAX entries; the counts say how many there are.
    """

    correction_id: Ulid = Field(description="The correction.")
    plan_id: Ulid = Field(description="The plan it corrected.")
    target_decision_id: Ulid = Field(description="The decision it corrected.")
    mode: CorrectionMode = Field(description="revert or append.")
    status: CorrectionStatus = Field(description="Its status; only an applied one changed "
                                     "anything.")
    applied_at: datetime | None = Field(default=None, description="When it was applied.")
    superseded: list[DecisionBrief] = Field(default_factory=list,
                                            description="Decisions it superseded (revert).")
    superseded_count: int = Field(default=0, ge=0, description="How many it superseded.")
    added: list[DecisionBrief] = Field(
        default_factory=list, description="Decisions it wrote: the replacement (revert); the "
        "user_intervention and the child plan's root (append).")
    child_plans_rolled_back: list[Ulid] = Field(default_factory=list,
                                                description="Child plans it rolled back.")
    child_plans_rolled_back_count: int = Field(default=0, ge=0,
                                               description="How many it rolled back.")
    child_plans_spawned: list[Ulid] = Field(default_factory=list,
                                            description="Child plan it spawned (append).")
    archived_artifacts_path: str | None = Field(
        default=None, description="Archive folder of the artifacts it archived (revert).")
    manifest_path: str | None = Field(
        default=None, description="The archive's manifest, listing every artifact.")
    lists_truncated: bool = Field(default=False, description="True when a list holds only "
                                  "its first entries.")


def correction_diff(correction: Correction, decisions: Mapping[str, Decision],
                    child_roots: Sequence[str] = (),
                    inline: int = INLINE_IDS_MAX) -> CorrectionDiff:
    """The diff of `correction`, from its recorded result.

    `decisions` holds what is known of the decisions it names (the first `inline`
    superseded ones and its new decision suffice); `child_roots` are the root decision
    IDs of the child plans it spawned. A correction that was not applied changed nothing.
    """
    c = correction
    base = {"correction_id": c.correction_id, "plan_id": c.plan_id,
            "target_decision_id": c.decision_id, "mode": c.mode, "status": c.status}
    if c.status is not CorrectionStatus.APPLIED:
        return CorrectionDiff(**base)
    added_ids = [i for i in [c.new_decision_id, *child_roots] if i is not None]
    rolled = list(c.child_plans_rolled_back)
    archive = c.archived_artifacts_path
    return CorrectionDiff(
        **base, applied_at=applied_at(c),
        superseded=[DecisionBrief.of(i, decisions.get(i)) for i in c.superseded_ids[:inline]],
        superseded_count=len(c.superseded_ids),
        added=[DecisionBrief.of(i, decisions.get(i)) for i in dict.fromkeys(added_ids)],
        child_plans_rolled_back=rolled[:inline],
        child_plans_rolled_back_count=len(rolled),
        child_plans_spawned=list(c.child_plans_spawned),
        archived_artifacts_path=archive,
        manifest_path=f"{archive.rstrip('/')}/{MANIFEST_NAME}" if archive else None,
        lists_truncated=len(c.superseded_ids) > inline or len(rolled) > inline,
    )
