"""The resume contract: where a plan's runtime goes on after a correction is APPLIED.

After a revert the plan re-executes from the corrected decision point; after an append
the child plan carries the operator's guidance and produces more decisions. The ledger
cannot run an agent, so it tells the agent's runtime, once per applied correction,
everything it needs to do that and nothing it must look up:

- where new decisions go (`resume_at`: the replacement after a revert, the child plan's
  root after an append), usable directly as the `parent` of the next decision;
- which of its own checkpoints to go back to (`target.actor_state_ref`, as the agent
  recorded it on the corrected decision);
- what the operator said (`guidance`), and what the correction removed.

The instruction is written to the correction's outbox in the same transaction as the
APPLIED transition, and published to `corrections.resume.<plan_id>` (the corrected plan)
with Nats-Msg-Id `resume:<correction_id>`: JetStream keeps it for a runtime that is down,
and a correction is applied at most once, so there is exactly one per correction.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from contracts.corrections import subjects
from contracts.corrections.append import AppendWrites
from contracts.corrections.record import Correction
from contracts.corrections.resume_points import ResumePoint, ResumeTarget
from contracts.corrections.revert import RevertWrites
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid
from contracts.shared.timestamps import UtcTime


class ResumeInstruction(Frozen):
    """Published once per APPLIED correction to `corrections.resume.<plan_id>`.

    revert: go back to `target.actor_state_ref`, take `guidance` into account, and record
    what follows under `resume_at` (the replacement decision, in the same plan).
    append: start the child plan `child_plan_id` with `guidance`; its decisions go under
    `resume_at` (the child plan's root). The corrected plan itself goes on unchanged.
    """

    correction_id: Ulid = Field(description="The applied correction.")
    plan_id: Ulid = Field(description="The corrected plan (the subject's token).")
    mode: CorrectionMode = Field(description="revert or append.", examples=["revert"])
    requested_by: str | None = Field(
        description="The operator who asked for it, as the ledger verified its signature; "
        "None when the request was not signed (a development ledger).")
    guidance: str = Field(description="What the operator said; for a revert without "
                          "guidance, a default naming the operator and the target.")
    guidance_defaulted: bool = Field(
        description="True when the operator gave no guidance (revert only).")
    applied_at: UtcTime = Field(description="When the correction was applied (UTC).")
    round: int = Field(default=1, ge=1, description="The round the correction was applied in "
                       "(1, plus one per operator retry).")
    target: ResumeTarget = Field(description="The corrected decision.")
    resume_at: ResumePoint = Field(
        description="Where new decisions go: the replacement (revert) or the child plan's "
        "root (append).")
    # revert
    replacement_decision_id: Ulid | None = Field(
        default=None, description="revert: the decision that replaced the target.")
    parent_decision_id: Ulid | None = Field(
        default=None, description="revert: the replacement's parent (the target's parent).")
    superseded_count: int = Field(
        default=0, ge=0, description="revert: how many decisions were superseded.")
    superseded_ids: list[Ulid] = Field(
        default_factory=list,
        description=f"revert: the superseded decisions, the first {INLINE_IDS_MAX} at most "
        "(BFS order, the target first).")
    child_plans_rolled_back: list[Ulid] = Field(
        default_factory=list,
        description=f"revert: child plans rolled back, the first {INLINE_IDS_MAX} at most; "
        "their runtimes should stop.")
    child_plans_rolled_back_count: int = Field(
        default=0, ge=0, description="revert: how many child plans were rolled back.")
    archived_artifacts_path: str | None = Field(
        default=None, description="revert: where the superseded decisions' artifacts went.")
    # append
    child_plan_id: Ulid | None = Field(default=None, description="append: the new child plan.")
    child_root_decision_id: Ulid | None = Field(
        default=None, description="append: its root prompt_definition (carries the guidance).")
    intervention_decision_id: Ulid | None = Field(
        default=None, description="append: the user_intervention added under the target.")

    @classmethod
    def after_revert(cls, applied: Correction, target: Decision,
                     revert: RevertWrites) -> ResumeInstruction:
        new = revert.new_decision
        return cls(
            **_common(applied, target),
            resume_at=ResumePoint(plan_id=new.plan_id, decision_id=new.decision_id),
            replacement_decision_id=new.decision_id,
            parent_decision_id=new.parent_decision_id,
            superseded_count=len(revert.supersede_ids),
            superseded_ids=revert.supersede_ids[:INLINE_IDS_MAX],
            child_plans_rolled_back=revert.child_plans_to_roll_back[:INLINE_IDS_MAX],
            child_plans_rolled_back_count=len(revert.child_plans_to_roll_back),
            archived_artifacts_path=applied.archived_artifacts_path)

    @classmethod
    def after_append(cls, applied: Correction, target: Decision,
                     append: AppendWrites) -> ResumeInstruction:
        root = append.child_root
        return cls(
            **_common(applied, target),
            resume_at=ResumePoint(plan_id=root.plan_id, decision_id=root.decision_id),
            child_plan_id=root.plan_id, child_root_decision_id=root.decision_id,
            intervention_decision_id=append.intervention.decision_id)

    @property
    def subject(self) -> str:
        return subjects.resume(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.resume_msg_id(self.correction_id)

    @property
    def resume_plan_id(self) -> str:
        """The plan whose runtime acts: the corrected plan (revert) or the child (append)."""
        return self.resume_at.plan_id

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.mode is CorrectionMode.REVERT:
            self._check_revert()
        else:
            self._check_append()
        for ids, count in ((self.superseded_ids, self.superseded_count),
                           (self.child_plans_rolled_back, self.child_plans_rolled_back_count)):
            if len(ids) != min(count, INLINE_IDS_MAX):
                raise ValueError(f"an instruction lists the first (at most {INLINE_IDS_MAX}) "
                                 "of count IDs")
        return self

    def _check_revert(self) -> None:
        if self.replacement_decision_id != self.resume_at.decision_id \
                or self.resume_at.plan_id != self.plan_id:
            raise ValueError("a revert resumes under its replacement, in the same plan")
        if self.child_plan_id or self.child_root_decision_id or self.intervention_decision_id:
            raise ValueError("child plan fields belong to an append")

    def _check_append(self) -> None:
        if self.child_plan_id is None or self.resume_at.plan_id != self.child_plan_id \
                or self.resume_at.decision_id != self.child_root_decision_id:
            raise ValueError("an append resumes at its child plan's root")
        if self.replacement_decision_id or self.superseded_count \
                or self.child_plans_rolled_back_count:
            raise ValueError("revert fields belong to a revert")


def _common(applied: Correction, target: Decision) -> dict[str, object]:
    if applied.status is not CorrectionStatus.APPLIED:
        raise ValueError("a resume instruction is for an applied correction")
    request = applied.request()
    return {
        "correction_id": applied.correction_id, "plan_id": applied.plan_id,
        "mode": applied.mode, "requested_by": applied.requested_by,
        "guidance": applied.guidance, "guidance_defaulted": request.guidance_defaulted,
        "applied_at": applied.last.at, "round": applied.round_of(),
        "target": ResumeTarget.of(target),
    }
