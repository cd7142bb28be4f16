"""The correction runner's next step, for every status and conflict count (no servers)."""

from __future__ import annotations

import pytest

from contracts.corrections.running import Step, next_step, next_to_run
from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus

pytestmark = pytest.mark.unit

EXPECTED = {
    CorrectionStatus.PENDING: Step.START_ANALYSIS,
    CorrectionStatus.ANALYZING: Step.ANALYZE,
    CorrectionStatus.EXECUTING: Step.EXECUTE,
    CorrectionStatus.APPLIED: Step.FINISHED,
    CorrectionStatus.FAILED: Step.FINISHED,
    CorrectionStatus.CANCELLED: Step.FINISHED,
}


def test_every_status_has_exactly_its_step() -> None:
    assert set(EXPECTED) == set(CorrectionStatus)
    for status, step in EXPECTED.items():
        assert next_step(status) is step, status
        assert (step is Step.FINISHED) == CORRECTION_LIFECYCLE.is_terminal(status)


@pytest.mark.parametrize("max_conflicts", [1, 2, 5])
@pytest.mark.parametrize("conflicts", range(7))
def test_conflicts_end_only_an_executing_attempt(conflicts: int, max_conflicts: int) -> None:
    for status in CorrectionStatus:
        step = next_step(status, conflicts=conflicts, max_conflicts=max_conflicts)
        if status is CorrectionStatus.EXECUTING:
            assert step is (Step.FAIL_ATTEMPT if conflicts >= max_conflicts else Step.EXECUTE)
        else:
            assert step is EXPECTED[status]


def test_every_step_is_reached_by_some_state() -> None:
    """No step is dead code: each is what some (status, conflicts) asks for."""
    reached = {next_step(status, conflicts=n, max_conflicts=2)
               for status in CorrectionStatus for n in range(3)}
    assert reached == set(Step)


def test_a_started_correction_is_run_before_any_pending_one() -> None:

    pending, analyzing, executing = (CorrectionStatus.PENDING, CorrectionStatus.ANALYZING,
                                     CorrectionStatus.EXECUTING)
    assert next_to_run([pending, pending]) == 0  # the oldest arrival
    assert next_to_run([pending, analyzing, pending]) == 1  # a late earlier arrival waits
    assert next_to_run([pending, pending, executing]) == 2
    assert next_to_run([analyzing, executing]) == 0
    with pytest.raises(ValueError, match="no unfinished"):
        next_to_run([])
