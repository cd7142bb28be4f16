"""What a correction writes, decided without touching the store.

The service loads the target (and runs the impact walk), calls `validate_target` and
then `revert_writes` or `append_writes`, and the store commits the returned write set
in one transaction. Keeping the decision here means every rule of a correction is tested
without a server, and the store only has to be atomic, not clever.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import PurePosixPath

from pydantic import Field

from contracts.corrections.errors import TargetInOtherPlan, TargetSuperseded
from contracts.corrections.requests import REVERT_CHOSEN_PREFIX, CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.corrections.transition import TransitionInfo
from contracts.decisions.context import ContextSnapshot
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord, PlanStatus
from contracts.decisions.types import DecisionType
from contracts.impact.errors import TargetNotFound
from contracts.impact.summary import CorrectionImpact
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid

__all__ = [
    "MANIFEST_NAME",
    "AppendWrites",
    "ArchiveEntry",
    "PlanRecord",
    "PlanStatus",
    "RevertWrites",
    "append_writes",
    "archive_folder",
    "archive_member",
    "guidance_context",
    "revert_writes",
    "validate_target",
]

MANIFEST_NAME = "manifest.json"
"""File name of the manifest inside a revert's archive folder."""


def validate_target(request: CorrectionRequest, target: Decision | None, *,
                    allow_superseded: bool = False) -> None:
    """Raise the named reason a correction of `target` cannot go ahead, if there is one.

    The plan is checked before supersession: a decision of another plan is not this
    plan's business whatever its state, and saying "superseded" would mislead. A dry run
    passes `allow_superseded` (its report warns instead); applying never does.
    """
    if target is None or target.decision_id != request.decision_id:
        raise TargetNotFound(request.decision_id, request.plan_id)
    if target.plan_id != request.plan_id:
        raise TargetInOtherPlan(target.decision_id, request.plan_id, target.plan_id)
    if target.superseded_by is not None and not allow_superseded:
        raise TargetSuperseded(target.decision_id, target.superseded_by)


def guidance_context(request: CorrectionRequest) -> ContextSnapshot:
    """The context of a decision an operator made: the guidance is all of it.

    The reference names the correction, whose document holds the guidance, so the
    context can be recovered the way an agent's stored context would be.
    """
    digest = hashlib.sha256(request.guidance.encode("utf-8")).hexdigest()
    return ContextSnapshot(
        hot_context_hash=f"sha256:{digest}",
        hot_context_ref=f"correction:{request.correction_id}",
    )


# --- revert -------------------------------------------------------------------------


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

    def applied_info(self, archived_artifacts_path: str | None) -> TransitionInfo:
        """What the transition to APPLIED records, once the archive is written."""
        return {
            "new_decision_id": self.new_decision.decision_id,
            "superseded_ids": list(self.supersede_ids),
            "child_plans_rolled_back": list(self.child_plans_to_roll_back),
            "archived_artifacts_path": archived_artifacts_path,
        }


def _check_mode(request: CorrectionRequest, mode: CorrectionMode) -> None:
    if request.mode is not mode:
        raise ValueError(f"a {request.mode.value} request cannot be planned as {mode.value}")


def revert_writes(
    request: CorrectionRequest,
    target: Decision,
    impact: CorrectionImpact,
    *,
    new_decision_id: str,
    sequence_number: int,
    at: datetime,
) -> RevertWrites:
    """The replacement decision and everything it supersedes, rolls back and archives."""
    _check_mode(request, CorrectionMode.REVERT)
    validate_target(request, target)
    if impact.target_decision_id != target.decision_id:
        raise ValueError("the impact was computed for another target")
    if not impact.complete:
        raise ValueError("a revert needs the whole impact, not a bounded or stopped walk")
    chosen = request.chosen_option or (
        REVERT_CHOSEN_PREFIX + target.chosen_option if request.guidance_defaulted
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
        rationale=f"Correction {request.correction_id} requested by {request.requested_by}.",
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
    )


# --- append -------------------------------------------------------------------------


class AppendWrites(Frozen):
    """Everything an append writes, in one transaction; the target itself is not touched."""

    correction_id: Ulid = Field(description="The correction.")
    plan_id: Ulid = Field(description="The plan of the target.")
    target_decision_id: Ulid = Field(description="The decision the child plan hangs under.")
    child_plan: PlanRecord = Field(description="The new child plan's record.")
    child_root: Decision = Field(description="Its root prompt_definition, carrying the guidance.")
    intervention: Decision = Field(
        description="user_intervention under the target; downstream_plan_ids names the child."
    )

    @property
    def new_decision_id(self) -> str:
        """The decision an append adds to the corrected plan: the intervention."""
        return self.intervention.decision_id

    def applied_info(self) -> TransitionInfo:
        return {
            "new_decision_id": self.intervention.decision_id,
            "child_plans_spawned": [self.child_plan.plan_id],
        }


def append_writes(
    request: CorrectionRequest,
    target: Decision,
    *,
    child_plan_id: str,
    child_root_decision_id: str,
    intervention_decision_id: str,
    sequence_number: int,
    at: datetime,
    project: str | None = None,
    action_template: str | None = None,
) -> AppendWrites:
    """A child plan rooted at the target, and the intervention decision linking the two.

    `sequence_number` is the next one of the target's plan (for the intervention);
    the child plan's root is its sequence 0. `project` and `action_template` are the
    parent plan's, which the child inherits.
    """
    _check_mode(request, CorrectionMode.APPEND)
    validate_target(request, target)
    context = guidance_context(request)
    origin = f"Correction {request.correction_id} requested by {request.requested_by}."
    child_plan = PlanRecord(
        plan_id=child_plan_id,
        parent_plan_id=target.plan_id,
        spawned_from_decision_id=target.decision_id,
        guidance=request.guidance,
        status=PlanStatus.ACTIVE,
        created_at=at,
        project=project,
        action_template=action_template,
        root_decision_id=child_root_decision_id,
    )
    child_root = Decision(
        decision_id=child_root_decision_id,
        plan_id=child_plan_id,
        parent_decision_id=None,
        sequence_number=0,
        decision_type=DecisionType.PROMPT_DEFINITION,
        question=f"Follow-up to decision {target.decision_id}: {target.question}",
        chosen_option=request.guidance,
        context_snapshot=context,
        rationale=origin,
        created_at=at,
        project=project,
        action_template=action_template,
    )
    intervention = Decision(
        decision_id=intervention_decision_id,
        plan_id=target.plan_id,
        parent_decision_id=target.decision_id,
        sequence_number=sequence_number,
        decision_type=DecisionType.USER_INTERVENTION,
        question=f"Operator guidance on: {target.question}",
        chosen_option=request.guidance,
        context_snapshot=context,
        rationale=origin,
        downstream_plan_ids=[child_plan_id],
        created_at=at,
    )
    return AppendWrites(
        correction_id=request.correction_id, plan_id=target.plan_id,
        target_decision_id=target.decision_id, child_plan=child_plan,
        child_root=child_root, intervention=intervention,
    )
