"""What a correction writes: target validation, the revert and append plans, plan records,
and properties checking that applying a plan leaves the tree as ADRs 0018 and 0019 require."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.corrections.append import AppendWrites, append_writes
from contracts.corrections.errors import TargetInOtherPlan, TargetSuperseded
from contracts.corrections.planning import validate_target
from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest, reverted_choice
from contracts.corrections.revert import RevertWrites, archive_member, revert_writes
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.decisions.types import DecisionType
from contracts.impact.errors import TargetNotFound
from contracts.shared.errors import DomainError, IllegalTransition
from tests.impact_graph import ImpactGraph, compute_impact
from tests.properties import examples
from tests.unit.test_impact import PLAN, PLAN2, dec, graphs, uid

pytestmark = pytest.mark.unit

AT = datetime(2025, 6, 1, 12, tzinfo=UTC)
NEW, CHILD_PLAN, CHILD_ROOT, INTERVENTION = uid(7001), uid(7002), uid(7003), uid(7004)

# Root 0; target 1 with a 7-decision subtree (1..7) carrying artifacts and a child plan.
TREE = (
    dec(0, files=["README.md"]),
    dec(1, 0, files=["db/migrate.sql"]), dec(2, 1, files=["db/migrate.sql", "app.py"]),
    dec(3, 1), dec(4, 2), dec(5, 3, type_=DecisionType.SUBPLAN_SPAWN, plans=[PLAN2]),
    dec(6, 3, files=["/abs/out.txt"]), dec(7, 6), dec(8, 0),
    dec(20, plan=PLAN2, files=["child.txt"]),
)


def req(mode: CorrectionMode = CorrectionMode.REVERT, **kw: Any) -> CorrectionRequest:
    fields: dict[str, Any] = {"plan_id": PLAN, "decision_id": uid(1), "mode": mode,
                              "guidance": "Use an online migration.", "requested_by": "alice"}
    return CorrectionRequest(**(fields | kw))


def target(n: int = 1) -> Decision:
    return next(d for d in TREE if d.decision_id == uid(n))


def revert(request: CorrectionRequest | None = None, n: int = 1) -> RevertWrites:
    request = request or req(decision_id=uid(n))
    im = compute_impact(uid(n), ImpactGraph.from_decisions(TREE))
    return revert_writes(request, target(n), im, new_decision_id=NEW, sequence_number=42, at=AT)


def append(request: CorrectionRequest | None = None) -> AppendWrites:
    return append_writes(
        request or req(CorrectionMode.APPEND), target(), child_plan_id=CHILD_PLAN,
        child_root_decision_id=CHILD_ROOT, intervention_decision_id=INTERVENTION,
        sequence_number=42, at=AT, project="shop", action_template="fix",
    )


def test_a_revert_looks_for_late_decisions_unless_its_plans_counter_is_unmoved() -> None:
    """The plan's counter read before the walk, against the one the transaction found:
    unmoved means nothing was recorded into the plan since; a walk into child plans, or
    one with no mark, is always checked."""
    plain = revert()
    assert plain.walked_at_sequence is None and plain.may_have_late_decisions(7)
    marked = plain.model_copy(update={"walked_at_sequence": 7, "child_plans_to_roll_back": []})
    assert not marked.may_have_late_decisions(7)
    assert marked.may_have_late_decisions(8)
    into_children = marked.model_copy(update={"child_plans_to_roll_back": [CHILD_PLAN]})
    assert into_children.may_have_late_decisions(7)


# --- validate_target --------------------------------------------------------------------


def test_a_current_target_of_the_plan_is_valid() -> None:
    validate_target(req(), target())


@pytest.mark.parametrize(("found", "error", "words"), [
    (None, TargetNotFound, "not found"),
    (dec(1, 0, plan=PLAN2), TargetInOtherPlan, f"belongs to plan {PLAN2}"),
    (dec(1, 0, superseded=True), TargetSuperseded, "already superseded"),
    (dec(1, 0, plan=PLAN2, superseded=True), TargetInOtherPlan, "not to plan"),
    (dec(2, 1), TargetNotFound, "not found"),
])
def test_an_unusable_target_is_named(
    found: Decision | None, error: type[DomainError], words: str,
) -> None:
    with pytest.raises(error, match=words) as err:
        validate_target(req(), found)
    assert uid(1) in str(err.value)


def test_planning_checks_the_target_and_the_mode() -> None:
    with pytest.raises(TargetSuperseded):
        revert_writes(req(), dec(1, 0, superseded=True),
                    compute_impact(uid(1), ImpactGraph.from_decisions(TREE)),
                    new_decision_id=NEW, sequence_number=1, at=AT)
    with pytest.raises(ValueError, match="append request"):
        revert(req(CorrectionMode.APPEND))
    with pytest.raises(ValueError, match="revert request"):
        append(req())
    with pytest.raises(ValueError, match="another target"):
        revert_writes(req(), target(), compute_impact(uid(2), ImpactGraph.from_decisions(TREE)),
                    new_decision_id=NEW, sequence_number=1, at=AT)


# --- revert ---------------------------------------------------------------------------------


def test_revert_replaces_the_target_as_the_issue_says() -> None:
    plan = revert(req(chosen_option="online migration"))
    new, old = plan.new_decision, target()
    assert (new.decision_id, new.is_correction, new.corrects_decision_id) == (NEW, True, uid(1))
    assert (new.plan_id, new.parent_decision_id, new.decision_type, new.question) == (
        old.plan_id, old.parent_decision_id, old.decision_type, old.question)
    assert new.chosen_option == "online migration"
    assert new.alternatives_considered == [old.chosen_option]
    assert new.correction_reason == "Use an online migration."
    assert (new.sequence_number, new.created_at, new.superseded_by) == (42, AT, None)
    assert new.downstream_decision_ids == [] and new.artifacts_produced == []


def test_revert_without_chosen_option_chooses_the_guidance() -> None:
    assert revert().new_decision.chosen_option == "Use an online migration."


def test_revert_without_guidance_says_it_is_a_revert_of_the_original_choice() -> None:
    request = CorrectionRequest(plan_id=PLAN, decision_id=target().decision_id,
                                mode=CorrectionMode.REVERT, requested_by="alice")
    new = revert(request).new_decision
    assert new.chosen_option == reverted_choice(target().chosen_option)
    assert new.correction_reason == request.guidance
    assert "alice" in request.guidance and target().decision_id in request.guidance
    named = request.model_copy(update={"chosen_option": "keep MySQL"})
    assert revert(named).new_decision.chosen_option == "keep MySQL"


def test_revert_of_a_seven_decision_subtree_supersedes_exactly_those_seven() -> None:
    plan = revert()
    assert sorted(plan.supersede_ids) == [uid(i) for i in range(1, 8)] + [uid(20)]
    assert plan.child_plans_to_roll_back == [PLAN2]
    assert plan.archive_folder == f"corrections/{PLAN}/{plan.correction_id}"
    assert [(e.decision_id, e.artifact_path, e.archived_as) for e in plan.manifest] == [
        (uid(1), "db/migrate.sql", f"{uid(1)}/0/db/migrate.sql"),
        (uid(2), "db/migrate.sql", f"{uid(2)}/0/db/migrate.sql"),
        (uid(2), "app.py", f"{uid(2)}/1/app.py"),
        (uid(6), "/abs/out.txt", f"{uid(6)}/0/abs/out.txt"),
        (uid(20), "child.txt", f"{uid(20)}/0/child.txt"),
    ]
    info = plan.applied_info("/archive/x")
    assert info["superseded_ids"] == plan.supersede_ids
    assert info["archived_artifacts_path"] == "/archive/x"


def test_revert_of_the_root_keeps_the_plan_metadata() -> None:
    root = dec(0).model_copy(update={"project": "shop", "action_template": "fix"})
    request = req(decision_id=uid(0))
    im = compute_impact(uid(0), ImpactGraph.from_decisions([root]))
    new = revert_writes(request, root, im, new_decision_id=NEW, sequence_number=3,
                      at=AT).new_decision
    assert (new.parent_decision_id, new.decision_type) == (None, DecisionType.PROMPT_DEFINITION)
    assert (new.project, new.action_template) == ("shop", "fix")


def test_the_correction_context_is_the_guidance() -> None:
    request = req()
    snap = revert(request).new_decision.context_snapshot
    assert snap.hot_context_hash == "sha256:" + hashlib.sha256(
        b"Use an online migration.").hexdigest()
    assert snap.hot_context_ref == f"correction:{request.correction_id}"


@pytest.mark.parametrize(("path", "member"), [
    ("a/b.txt", "D/0/a/b.txt"), ("/etc/passwd", "D/0/etc/passwd"),
    ("../../x", "D/0/x"), ("a/./../b", "D/0/a/b"), ("..", "D/0/artifact"),
    ("C:\\dir\\f.txt", "D/0/C:/dir/f.txt"),
])
def test_archive_members_stay_inside_the_archive(path: str, member: str) -> None:
    assert archive_member("D", 0, path) == member


@given(st.text(alphabet="ab./\\", max_size=12), st.integers(0, 9))
def test_no_recorded_path_escapes_the_archive(path: str, index: int) -> None:
    member = PurePosixPath(archive_member("D", index, path))
    assert not member.is_absolute()
    assert ".." not in member.parts and "." not in member.parts
    assert member.parts[:2] == ("D", str(index)) and len(member.parts) >= 3


# --- append ---------------------------------------------------------------------------------


def test_append_spawns_a_child_plan_under_the_target() -> None:
    request = req(CorrectionMode.APPEND)
    plan = append(request)
    assert plan.child_plan == PlanRecord(
        plan_id=CHILD_PLAN, parent_plan_id=PLAN, spawned_from_decision_id=uid(1),
        guidance=request.guidance, status=PlanStatus.ACTIVE, created_at=AT,
        project="shop", action_template="fix", root_decision_id=CHILD_ROOT)
    root = plan.child_root
    assert (root.plan_id, root.parent_decision_id, root.decision_type, root.sequence_number) == (
        CHILD_PLAN, None, DecisionType.PROMPT_DEFINITION, 0)
    assert root.chosen_option == request.guidance
    assert root.context_snapshot.hot_context_ref == f"correction:{request.correction_id}"
    assert root.context_snapshot.hot_context_hash == "sha256:" + hashlib.sha256(
        request.guidance.encode()).hexdigest()
    iv = plan.intervention
    assert (iv.plan_id, iv.parent_decision_id, iv.decision_type) == (
        PLAN, uid(1), DecisionType.USER_INTERVENTION)
    assert (iv.downstream_plan_ids, iv.sequence_number, iv.is_correction) == (
        [CHILD_PLAN], 42, False)
    assert plan.new_decision_id == INTERVENTION
    assert plan.applied_info() == {"new_decision_id": INTERVENTION,
                                   "child_plans_spawned": [CHILD_PLAN]}


def test_an_applied_append_reaches_the_child_plan_in_a_later_impact() -> None:
    plan = append()
    after = ImpactGraph.from_decisions([*TREE, plan.intervention, plan.child_root])
    im = compute_impact(uid(1), after)
    assert CHILD_PLAN in im.affected_child_plan_ids
    assert {INTERVENTION, CHILD_ROOT} <= set(im.affected_decision_ids)


def test_plans_results_fit_the_correction_aggregate() -> None:
    for request, info in ((req(), revert().applied_info(None)),
                          (req(CorrectionMode.APPEND), append().applied_info())):
        c = Correction.from_request(request, AT)
        for step in (CorrectionStatus.ANALYZING, CorrectionStatus.EXECUTING):
            c = c.transition(step, AT)
        assert c.transition(CorrectionStatus.APPLIED, AT, **info).status is CorrectionStatus.APPLIED


# --- plan records ------------------------------------------------------------------------


def test_plan_record_lifecycle() -> None:
    p = append().child_plan
    assert p.transition(PlanStatus.ROLLED_BACK).status is PlanStatus.ROLLED_BACK
    assert p.transition(PlanStatus.COMPLETED).transition(PlanStatus.ROLLED_BACK).status is (
        PlanStatus.ROLLED_BACK)
    with pytest.raises(IllegalTransition):
        p.transition(PlanStatus.ROLLED_BACK).transition(PlanStatus.ACTIVE)
    with pytest.raises(IllegalTransition):
        p.transition(PlanStatus.ACTIVE)


def test_plan_record_rules() -> None:
    assert PlanRecord(plan_id=PLAN).parent_plan_id is None
    with pytest.raises(ValidationError, match="go together"):
        PlanRecord(plan_id=PLAN, parent_plan_id=PLAN2)
    with pytest.raises(ValidationError, match="own parent"):
        PlanRecord(plan_id=PLAN, parent_plan_id=PLAN, spawned_from_decision_id=uid(1))
    with pytest.raises(ValidationError):
        PlanRecord(plan_id=PLAN, guidance="")


# --- properties: applying a plan leaves the tree as ADRs 0018 and 0019 require ---------


def apply_revert(decisions: list[Decision], plan: RevertWrites) -> list[Decision]:
    """What the store's transaction does, in memory."""
    gone = set(plan.supersede_ids)
    return [
        *(d.model_copy(update={"superseded_by": plan.new_decision.decision_id})
          if d.decision_id in gone else d for d in decisions),
        plan.new_decision,
    ]


@settings(max_examples=examples(150))
@given(graphs(), st.text(min_size=1, max_size=50).filter(str.strip), st.booleans())
def test_an_applied_revert_replaces_exactly_the_affected_subtree(
    case: tuple[list[Decision], int], guidance: str, with_option: bool,
) -> None:
    decisions, t = case
    tgt = decisions[t]
    request = CorrectionRequest(
        plan_id=tgt.plan_id, decision_id=tgt.decision_id, mode=CorrectionMode.REVERT,
        guidance=guidance, requested_by="p", chosen_option="opt" if with_option else None)
    if tgt.superseded_by is not None:
        with pytest.raises(TargetSuperseded):
            validate_target(request, tgt)
        return
    im = compute_impact(tgt.decision_id, ImpactGraph.from_decisions(decisions))
    plan = revert_writes(request, tgt, im, new_decision_id=NEW, sequence_number=len(decisions),
                       at=AT)
    after = apply_revert(decisions, plan)
    current_before = {d.decision_id for d in decisions if d.superseded_by is None}
    current_after = {d.decision_id for d in after if d.superseded_by is None}
    assert current_after == (current_before - set(im.affected_decision_ids)) | {NEW}
    assert {d.decision_id for d in after if d.superseded_by == NEW} == set(
        im.affected_decision_ids)
    # The replacement stands alone: nothing current hangs below it yet.
    assert compute_impact(NEW, ImpactGraph.from_decisions(after)).affected_decision_ids == [NEW]
    assert len({e.archived_as for e in plan.manifest}) == len(plan.manifest)


def test_the_correction_domain_imports_no_io_library() -> None:
    code = (
        "import sys\n"
        "import contracts.corrections.revert, contracts.corrections.append\n"
        "import contracts.impact.summary, contracts.impact.walk\n"
        "import contracts.corrections.events, contracts.corrections.subjects\n"
        "import contracts.shared.lifecycle, contracts.decisions.plans\n"
        "io = {'pymongo', 'bson', 'nats', 'faststream'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in io))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2])
    assert out.stdout.strip() == "[]"
