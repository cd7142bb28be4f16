"""What a revert writes, in one transaction: the replacement decision, everything it
supersedes and rolls back, and the archive manifest of the artifacts it removes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import PurePosixPath

from pydantic import Field

from contracts.corrections.archive.rules import NotCopiedArtifact
from contracts.corrections.planning import check_mode, guidance_context, validate_target
from contracts.corrections.requests import CorrectionRequest, reverted_choice
from contracts.corrections.states import CorrectionMode
from contracts.corrections.transition import TransitionInfo
from contracts.decisions.model import Decision
from contracts.impact.summary import CorrectionImpact
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid

MANIFEST_NAME = "manifest.json"
"""File name of the manifest inside a revert's archive folder."""


class ArchiveEntry(Frozen):
    """One line of a revert's manifest: an artifact and where its copy goes."""

    decision_id: Ulid = Field(description="The superseded decision that produced it.")
    artifact_path: str = Field(description="Its path as recorded (relative to ARTIFACTS_ROOT "
                               "or absolute).")
    artifact_type: str = Field(description="Its kind, as recorded.")
    archived_as: str = Field(description="Relative path of its copy inside the archive folder.")


def archive_folder(plan_id: str, correction_id: str) -> str:
    """Relative archive location of one correction; the store puts it under its archive root."""
    return f"corrections/{plan_id}/{correction_id}"


def archive_member(decision_id: str, index: int, artifact_path: str) -> str:
    """Where an artifact's copy goes inside the archive.

    A recorded path is untrusted: '..', '.', empty parts and the root are dropped so a
    copy can never land outside the archive. The per-decision index keeps two paths
    that normalise alike (`a/../b`, `a/b`) from overwriting each other.
    """
    parts = [
        p for p in PurePosixPath(artifact_path.replace("\\", "/")).parts
        if p.strip("/") not in {"", ".", ".."}  # '//' is a root part on POSIX too
    ]
    return "/".join([decision_id, str(index), *(parts or ["artifact"])])


class RevertWrites(Frozen):
    """Everything a revert writes, in one transaction."""

    correction_id: Ulid = Field(description="The correction.")
    plan_id: Ulid = Field(description="The plan corrected.")
    target_decision_id: Ulid = Field(description="The decision corrected.")
    new_decision: Decision = Field(description="The replacement, is_correction=True.")
    supersede_ids: list[Ulid] = Field(
        description="Decisions whose superseded_by becomes new_decision's ID: all affected."
    )
    child_plans_to_roll_back: list[Ulid] = Field(description="Plans to mark rolled_back.")
    archive_folder: str = Field(description="Relative archive location for the artifacts.")
    manifest: list[ArchiveEntry] = Field(description="Every affected artifact.")
    walked_at_sequence: int | None = Field(
        default=None, ge=0,
        description="The plan's next sequence number read before the impact walk began "
        "(None: not known). The transaction looks for decisions recorded under the subtree "
        "since the walk only when the plan's counter has moved from it, or when the walk "
        "reached child plans (their counters are not marked).")

    def may_have_late_decisions(self, reserved: int) -> bool:
        """Whether a decision may have been recorded under what this supersedes after
        the walk read it. `reserved`: the sequence number the transaction took for the
        replacement, i.e. the plan's counter as the transaction found it. Every decision
        recorded into the plan moves that counter in its own transaction (and one
        committing after this transaction's snapshot conflicts with it), so an unmoved
        counter means nothing was recorded since the walk began. A walk that reached
        child plans is always checked: their counters are not marked."""
        return self.walked_at_sequence is None or reserved != self.walked_at_sequence \
            or bool(self.child_plans_to_roll_back)

    def applied_info(self, archived_artifacts_path: str | None,
                     not_copied: Sequence[NotCopiedArtifact] = ()) -> TransitionInfo:
        """What the transition to APPLIED records, once the archive is written: its
        folder, and the first INLINE_IDS_MAX artifacts it holds no copy of (with the count).
        """
        return {
            "new_decision_id": self.new_decision.decision_id,
            "superseded_ids": list(self.supersede_ids),
            "child_plans_rolled_back": list(self.child_plans_to_roll_back),
            "archived_artifacts_path": archived_artifacts_path,
            "archive_not_copied": list(not_copied[:INLINE_IDS_MAX]),
            "archive_not_copied_count": len(not_copied),
        }


def revert_writes(
    request: CorrectionRequest,
    target: Decision,
    impact: CorrectionImpact,
    *,
    new_decision_id: str,
    sequence_number: int,
    at: datetime,
    walked_at_sequence: int | None = None,
) -> RevertWrites:
    """The replacement decision and everything it supersedes, rolls back and archives."""
    check_mode(request, CorrectionMode.REVERT)
    validate_target(request, target)
    if impact.target_decision_id != target.decision_id:
        raise ValueError("the impact was computed for another target")
    if not impact.complete:
        raise ValueError("a revert needs the whole impact, not a bounded or stopped walk")
    chosen = request.chosen_option or (
        reverted_choice(target.chosen_option) if request.guidance_defaulted
        else request.guidance)
    new = Decision(
        decision_id=new_decision_id,
        plan_id=target.plan_id,
        parent_decision_id=target.parent_decision_id,
        sequence_number=sequence_number,
        decision_type=target.decision_type,
        question=target.question,
        chosen_option=chosen,
        # The original choice was on the table and the operator overruled it.
        alternatives_considered=[target.chosen_option] if target.chosen_option != chosen else [],
        context_snapshot=guidance_context(request),
        # Who asked is on the correction, as verified; the body's requested_by is a claim.
        rationale=f"Correction {request.correction_id}.",
        created_at=at,
        is_correction=True,
        corrects_decision_id=target.decision_id,
        correction_reason=request.guidance,
        project=target.project,
        action_template=target.action_template,
    )
    counters: dict[str, int] = {}
    manifest = []
    for a in impact.affected_artifacts:
        index = counters[a.decision_id] = counters.get(a.decision_id, -1) + 1
        manifest.append(ArchiveEntry(
            decision_id=a.decision_id, artifact_path=a.artifact_path,
            artifact_type=a.artifact_type,
            archived_as=archive_member(a.decision_id, index, a.artifact_path),
        ))
    return RevertWrites(
        correction_id=request.correction_id,
        plan_id=target.plan_id,
        target_decision_id=target.decision_id,
        new_decision=new,
        supersede_ids=list(impact.affected_decision_ids),
        child_plans_to_roll_back=list(impact.affected_child_plan_ids),
        archive_folder=archive_folder(target.plan_id, request.correction_id),
        manifest=manifest,
        walked_at_sequence=walked_at_sequence,
    )
