"""What one correction changed (`correction_diff`), from its recorded result: what
`agents correction diff` prints. Computed from the ledger itself; no snapshots are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import Field

from contracts.corrections.archive.rules import NotCopiedArtifact
from contracts.corrections.as_of import applied_at
from contracts.corrections.record import Correction
from contracts.corrections.revert import MANIFEST_NAME
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid
from contracts.shared.rules import EchoText


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
    archive_not_copied: list[NotCopiedArtifact] = Field(
        default_factory=list, description="Artifacts the archive holds no copy of, and why "
        "(the first ones; the manifest lists them all).")
    archive_not_copied_count: int = Field(default=0, ge=0, description="How many.")
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
        archive_not_copied=list(c.archive_not_copied),
        archive_not_copied_count=c.archive_not_copied_count,
        lists_truncated=len(c.superseded_ids) > inline or len(rolled) > inline
        or c.archive_not_copied_count > len(c.archive_not_copied),
    )
