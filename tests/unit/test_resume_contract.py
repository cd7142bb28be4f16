"""The resume instruction is built from what the correction wrote, and cannot say two
things at once (pure, no servers)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.corrections.append import AppendWrites
from contracts.corrections.record import Correction
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.resume_points import TARGET_TEXT_MAX, ResumePoint
from contracts.corrections.revert import RevertWrites
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.context import ContextSnapshot
from contracts.shared.bounds import INLINE_IDS_MAX
from tests.unit.test_impact import PLAN, PLAN2, uid
from tests.unit.test_write_sets import (
    AT,
    CHILD_PLAN,
    CHILD_ROOT,
    INTERVENTION,
    NEW,
    append,
    req,
    revert,
    target,
)

pytestmark = pytest.mark.unit


def applied(mode: CorrectionMode, plan: RevertWrites | AppendWrites, **kw: object) -> Correction:
    c = Correction.from_request(req(mode, **kw), AT)
    for step in (CorrectionStatus.ANALYZING, CorrectionStatus.EXECUTING):
        c = c.transition(step, AT)
    info = plan.applied_info("/archive/x") if isinstance(plan, RevertWrites) \
        else plan.applied_info()
    return c.transition(CorrectionStatus.APPLIED, AT, **info)


def test_a_revert_resumes_under_the_replacement_from_the_targets_checkpoint() -> None:
    t = target().model_copy(update={"context_snapshot": ContextSnapshot(
        hot_context_hash="sha256:" + "a" * 64, hot_context_ref="s3://ctx/1",
        actor_state_ref="langgraph:t1:cp7")})
    plan = revert()
    i = ResumeInstruction.after_revert(applied(CorrectionMode.REVERT, plan), t, plan)
    assert i.resume_at == ResumePoint(plan_id=PLAN, decision_id=NEW)
    assert i.replacement_decision_id == NEW and i.parent_decision_id == uid(0)
    assert i.target.actor_state_ref == "langgraph:t1:cp7"
    assert i.target.hot_context_ref == "s3://ctx/1"
    assert i.superseded_count == 8 and i.child_plans_rolled_back == [PLAN2]
    assert i.archived_artifacts_path == "/archive/x"
    assert i.guidance == "Use an online migration." and not i.guidance_defaulted
    assert i.subject == f"corrections.resume.{PLAN}"
    assert i.msg_id == f"resume:{i.correction_id}"
    assert ResumeInstruction.model_validate_json(i.model_dump_json()) == i


def test_a_revert_without_guidance_says_the_guidance_was_defaulted() -> None:
    plan = revert()
    c = applied(CorrectionMode.REVERT, plan, guidance=None)
    i = ResumeInstruction.after_revert(c, target(), plan)
    assert i.guidance_defaulted and i.guidance == c.guidance


def test_an_append_resumes_at_the_child_plans_root() -> None:
    plan = append()
    i = ResumeInstruction.after_append(applied(CorrectionMode.APPEND, plan), target(), plan)
    assert i.resume_at == ResumePoint(plan_id=CHILD_PLAN, decision_id=CHILD_ROOT)
    assert i.resume_plan_id == CHILD_PLAN and i.plan_id == PLAN
    assert (i.child_plan_id, i.child_root_decision_id, i.intervention_decision_id) == (
        CHILD_PLAN, CHILD_ROOT, INTERVENTION)
    assert i.replacement_decision_id is None and i.superseded_count == 0


def test_only_an_applied_correction_has_an_instruction() -> None:
    plan = revert()
    pending = Correction.from_request(req(), AT)
    with pytest.raises(ValueError, match="applied"):
        ResumeInstruction.after_revert(pending, target(), plan)


def test_an_instruction_cannot_mix_the_modes_or_miscount() -> None:
    plan = revert()
    good = ResumeInstruction.after_revert(applied(CorrectionMode.REVERT, plan), target(), plan)
    body = good.model_dump()
    for bad in ({"child_plan_id": CHILD_PLAN},
                {"resume_at": {"plan_id": PLAN, "decision_id": uid(3)}},
                {"superseded_count": 1},
                {"mode": "append"}):
        with pytest.raises(ValidationError):
            ResumeInstruction.model_validate(body | bad)


def test_an_instruction_stays_small_whatever_the_target_says() -> None:
    huge = "x" * 200_000
    t = target().model_copy(update={"question": huge, "chosen_option": huge})
    plan = revert()
    i = ResumeInstruction.after_revert(applied(CorrectionMode.REVERT, plan), t, plan)
    assert len(i.target.question) == len(i.target.chosen_option) == TARGET_TEXT_MAX
    assert len(i.model_dump_json()) < 64 * 1024
    assert len(i.superseded_ids) <= INLINE_IDS_MAX
