"""contracts.corrections.as_of and .diff: the tree as of a point, and what one correction
changed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from contracts.corrections.as_of import (
    SequenceCut,
    TimeCut,
    applied_at,
    cut_of_correction,
    superseded_time,
    tree_as_of,
)
from contracts.corrections.diff import correction_diff
from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from tests.unit.test_impact import PLAN, PLAN2, T0, dec, uid

S = CorrectionStatus
C1, C2 = uid(8001), uid(8002)
R = 50  # the replacement written by C1, a revert of 1


def at(seconds: int) -> timedelta:
    return timedelta(seconds=seconds)


def applied(mode: CorrectionMode, correction_id: str, target: int, when: int,
            **result: object) -> Correction:
    request = CorrectionRequest(correction_id=correction_id, plan_id=PLAN,
                                decision_id=uid(target), mode=mode, guidance="do better",
                                requested_by="alice")
    c = Correction.from_request(request, T0)
    c = c.transition(S.ANALYZING, T0 + at(when - 2)).transition(S.EXECUTING, T0 + at(when - 1))
    return c.transition(S.APPLIED, T0 + at(when), **result)  # type: ignore[arg-type]


def superseded(d: Decision, by: int, when: int | None) -> Decision:
    return d.model_copy(update={
        "superseded_by": uid(by), "superseded_by_correction": C1 if when is not None else None,
        "superseded_at": T0 + at(when) if when is not None else None})


def ledger(superseded_at: int | None = 100) -> list[Decision]:
    """Root 0; 1 -> 2 and 3 under it; C1 reverted 1 at t=100 (replacement 50, seq 4);
    then 6 was recorded under the replacement (seq 5, t=110)."""
    return [
        dec(0, seq=0, at=0),
        superseded(dec(1, 0, seq=1, at=10), R, superseded_at),
        superseded(dec(2, 1, seq=2, at=20), R, superseded_at),
        dec(3, 0, seq=3, at=30),
        dec(R, 0, seq=4, at=100),
        dec(6, R, seq=5, at=110),
    ]


def ids(decisions: list[Decision]) -> list[str]:
    return [d.decision_id for d in decisions]


def nums(*ns: int) -> list[str]:
    return [uid(n) for n in ns]


C1_APPLIED = applied(CorrectionMode.REVERT, C1, 1, 100, new_decision_id=uid(R),
                     superseded_ids=nums(1, 2), archived_artifacts_path="/arch/c1/")


@pytest.mark.parametrize(("sequence", "expected"), [
    (0, [0]), (3, [0, 1, 2, 3]), (4, [0, 3, R]), (5, [0, 3, R, 6]),
])
def test_sequence_cut(sequence: int, expected: list[int]) -> None:
    assert ids(tree_as_of(ledger(), SequenceCut(sequence))) == nums(*expected)


def test_as_of_a_correction_is_the_tree_it_produced_or_the_one_it_changed() -> None:
    by_id = {d.decision_id: d for d in ledger()}
    assert cut_of_correction(C1_APPLIED, by_id) == SequenceCut(4)
    assert cut_of_correction(C1_APPLIED, by_id, before=True) == SequenceCut(3)
    assert ids(tree_as_of(ledger(), cut_of_correction(C1_APPLIED, by_id, before=True))) == \
        nums(0, 1, 2, 3)


def test_a_correction_that_changed_nothing_has_no_cut() -> None:
    pending = Correction.from_request(CorrectionRequest(
        plan_id=PLAN, decision_id=uid(1), mode=CorrectionMode.REVERT, guidance="g",
        requested_by="bob"), T0)
    with pytest.raises(ValueError, match="not applied"):
        cut_of_correction(pending, {})
    with pytest.raises(ValueError, match="not recorded in this plan"):
        cut_of_correction(C1_APPLIED, {})


@pytest.mark.parametrize(("seconds", "expected"), [
    (-1, []), (0, [0]), (20, [0, 1, 2]), (99, [0, 1, 2, 3]), (100, [0, 3, R]),
    (200, [0, 3, R, 6]),
])
def test_time_cut(seconds: int, expected: list[int]) -> None:
    assert ids(tree_as_of(ledger(), TimeCut(T0 + at(seconds)))) == nums(*expected)


def test_time_cut_without_superseded_at_uses_the_applied_time_then_the_replacement() -> None:
    old = ledger(superseded_at=None)
    # The correction applied at t=150 (its replacement says t=100): the applied time wins.
    late = {uid(R): T0 + at(150)}
    assert ids(tree_as_of(old, TimeCut(T0 + at(120)), late)) == nums(0, 1, 2, 3, R, 6)
    assert ids(tree_as_of(old, TimeCut(T0 + at(150)), late)) == nums(0, 3, R, 6)
    # No correction known: the replacement's own created_at.
    assert ids(tree_as_of(old, TimeCut(T0 + at(99)))) == nums(0, 1, 2, 3)
    assert ids(tree_as_of(old, TimeCut(T0 + at(100)))) == nums(0, 3, R)
    assert superseded_time(old[1], None, {}) is None


def test_a_replacement_that_cannot_be_placed_supersedes_all_along() -> None:
    orphaned = [d for d in ledger(superseded_at=None) if d.decision_id != uid(R)]
    assert ids(tree_as_of(orphaned, SequenceCut(3))) == nums(0, 3)
    assert ids(tree_as_of(orphaned, TimeCut(T0 + at(50)))) == nums(0, 3)


def test_applied_at_is_the_applied_transition() -> None:
    assert applied_at(C1_APPLIED) == T0 + at(100)
    assert applied_at(Correction.from_request(CorrectionRequest(
        plan_id=PLAN, decision_id=uid(1), mode="revert", guidance="g", requested_by="b"),
        T0)) is None


def test_diff_of_a_revert() -> None:
    by_id = {d.decision_id: d for d in ledger()}
    diff = correction_diff(C1_APPLIED, by_id)
    assert diff.status is S.APPLIED and diff.applied_at == T0 + at(100)
    assert [b.decision_id for b in diff.superseded] == nums(1, 2)
    assert diff.superseded[0].chosen_option == "o1" and diff.superseded_count == 2
    assert [b.decision_id for b in diff.added] == nums(R)
    assert diff.manifest_path == "/arch/c1/manifest.json"
    assert not diff.lists_truncated and diff.child_plans_spawned == []


def test_diff_of_an_append_adds_the_intervention_and_the_child_root() -> None:
    c = applied(CorrectionMode.APPEND, C2, 3, 300, new_decision_id=uid(60),
                child_plans_spawned=[PLAN2])
    diff = correction_diff(c, {uid(60): dec(60, 3, seq=6)}, child_roots=[uid(61)])
    assert [(b.decision_id, b.sequence_number) for b in diff.added] == [
        (uid(60), 6), (uid(61), None)]  # the child root is named even if not loaded
    assert diff.child_plans_spawned == [PLAN2] and diff.superseded == []
    assert diff.manifest_path is None


def test_diff_lists_are_bounded_and_a_correction_not_applied_changed_nothing() -> None:
    many = applied(CorrectionMode.REVERT, C1, 1, 100, new_decision_id=uid(R),
                   superseded_ids=nums(*range(1, 11)), child_plans_rolled_back=[PLAN2])
    diff = correction_diff(many, {}, inline=3)
    assert len(diff.superseded) == 3 and diff.superseded_count == 10 and diff.lists_truncated
    assert diff.child_plans_rolled_back == [PLAN2]
    pending = Correction.from_request(CorrectionRequest(
        plan_id=PLAN, decision_id=uid(1), mode="revert", guidance="g", requested_by="b"), T0)
    empty = correction_diff(pending, {})
    assert empty.status is S.PENDING and empty.added == [] and empty.applied_at is None
