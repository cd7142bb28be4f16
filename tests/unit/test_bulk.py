"""Bulk corrections' pure rules: the batch lifecycle, the derived correction IDs, the
conflict rule, the aggregate and the progress read from the corrections' states."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.bulk.model import BulkBatch, BulkFilter, correction_id_for
from contracts.bulk.preview import MatchImpact, aggregate, conflicts
from contracts.bulk.progress import progress
from contracts.bulk.states import BATCH_LIFECYCLE, CANCELLABLE, BatchState, ItemState
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.shared.errors import IllegalTransition
from contracts.shared.ids import is_ulid, new_id

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def test_the_lifecycle_ends_three_ways_and_only_live_batches_cancel() -> None:
    assert BATCH_LIFECYCLE.terminal == {BatchState.COMPLETED, BatchState.PARTIALLY_FAILED,
                                        BatchState.CANCELLED}
    assert {BatchState.REQUESTED, BatchState.RUNNING} == CANCELLABLE
    with pytest.raises(IllegalTransition):
        BATCH_LIFECYCLE.check(BatchState.REQUESTED, BatchState.COMPLETED)
    with pytest.raises(IllegalTransition):
        BATCH_LIFECYCLE.check(BatchState.CANCELLED, BatchState.RUNNING)


def test_correction_ids_are_ulids_fixed_by_batch_and_decision() -> None:
    batch, d = new_id(), new_id()
    cid = correction_id_for(batch, d)
    assert is_ulid(cid) and cid == correction_id_for(batch.lower(), d)
    assert cid != correction_id_for(batch, new_id()) != correction_id_for(new_id(), d)
    assert cid[:10] == batch[:10]  # the batch's time


IDS = [new_id() for _ in range(6)]
A, B, C, D, X, Y = IDS
PLANS = {"": new_id(), "Q": new_id()}


def _m(decision: str, *reached: str, plan: str = "", superseded: bool = False,
       files: tuple[str, ...] = ()) -> MatchImpact:
    return MatchImpact(decision, PLANS.get(plan, plan), superseded, (decision, *reached),
                       files, (), 1.0, False)




def test_a_match_inside_another_is_covered_by_a_revert_and_kept_by_an_append() -> None:
    outer = _m(A, X, B, C, files=("a.py", "b.py"))
    inner = _m(B, C, files=("b.py",))
    innermost = _m(C)
    apart = _m(D, Y, plan="Q", files=("d.py",))
    found = conflicts([outer, inner, innermost, apart])
    assert {(c.decision_id, c.covered_by) for c in found} == {(B, A), (C, A), (C, B)}

    batch = new_id()
    revert = aggregate(batch, CorrectionMode.REVERT, [outer, inner, innermost, apart], {})
    assert (revert.matches, revert.plans, revert.to_request, revert.covered) == (4, 2, 2, 2)
    assert revert.affected_decisions == 6  # A X B C, D Y: each counted once
    assert revert.files == ["a.py", "b.py", "d.py"]
    assert revert.risk.value == "medium" and revert.risk_counts == {
        "low": 1, "medium": 1, "high": 0}
    states = {i.decision_id: i.state for i in revert.items}
    assert states == {A: ItemState.PLANNED, B: ItemState.COVERED, C: ItemState.COVERED,
                      D: ItemState.PLANNED}

    append = aggregate(batch, CorrectionMode.APPEND, [outer, inner, innermost, apart], {})
    assert (append.to_request, append.covered, append.conflicts_count) == (4, 0, 3)


def test_superseded_and_out_of_scope_matches_are_skipped_with_their_reason() -> None:
    preview = aggregate(new_id(), CorrectionMode.REVERT,
                        [_m(A, superseded=True), _m(B, plan="Q"), _m(C)],
                        {B: "operator_scope: plan Q is of project other"})
    notes = {i.decision_id: (i.state, i.note) for i in preview.items}
    assert notes[A] == (ItemState.SUPERSEDED, "already superseded")
    assert notes[B] == (ItemState.REFUSED, "operator_scope: plan Q is of project other")
    assert notes[C] == (ItemState.PLANNED, None)
    assert (preview.to_request, preview.refused, preview.superseded) == (1, 1, 1)


def _batch(state: BatchState, *items: tuple[str, ItemState]) -> BulkBatch:
    bid = new_id()
    preview = aggregate(bid, CorrectionMode.REVERT, [_m(d) for d, _ in items], {})
    made = [i.model_copy(update={"state": s}) for i, (_, s) in zip(preview.items, items,
                                                                    strict=True)]
    return BulkBatch(batch_id=bid, filter=BulkFilter(text="x"), mode=CorrectionMode.REVERT,
                     reason="r", operator=None, requested_by="me", state=state, items=made,
                     created_at=NOW, updated_at=NOW)


def test_progress_is_the_corrections_states_and_ends_the_batch_when_all_settled() -> None:
    batch = _batch(BatchState.RUNNING, (A, ItemState.REQUESTED), (B, ItemState.REQUESTED),
                   (C, ItemState.COVERED))
    cid = {i.decision_id: i.correction_id for i in batch.items}
    half = progress(batch, {cid[A]: CorrectionStatus.APPLIED}, NOW)
    assert half.state is BatchState.RUNNING and half.counts() == {
        "applied": 1, "requested": 1, "covered": 1}
    done = progress(batch, {cid[A]: CorrectionStatus.APPLIED,
                            cid[B]: CorrectionStatus.APPLIED}, NOW)
    assert done.state is BatchState.COMPLETED
    failed = progress(batch, {cid[A]: CorrectionStatus.APPLIED,
                              cid[B]: CorrectionStatus.FAILED}, NOW)
    assert failed.state is BatchState.PARTIALLY_FAILED
    # A batch still sending, or cancelled, does not end on its corrections' word.
    sending = _batch(BatchState.REQUESTED, (A, ItemState.REQUESTED), (B, ItemState.PLANNED))
    assert progress(sending, {}, NOW).state is BatchState.REQUESTED
    stopped = _batch(BatchState.CANCELLED, (A, ItemState.REQUESTED),
                     (B, ItemState.NOT_REQUESTED))
    ended = progress(stopped, {stopped.items[0].correction_id: CorrectionStatus.CANCELLED},
                     NOW)
    assert ended.state is BatchState.CANCELLED and ended.settled


def test_a_filter_is_recorded_as_valid_text_and_described() -> None:
    f = BulkFilter(text="a\ud800b", path="src/")
    assert f.text == "a?b" and f.search().text == "a?b"
    assert f.described() == '"a?b" path=src/'
    assert BulkFilter().described() == "(every decision)"
