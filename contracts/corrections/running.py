"""What a plan's correction runner does next, decided from the stored corrections alone.

The runner (services/corrections/runner.py) reads the correction, asks `next_step`, does
that step (one transaction), and reads again: a crash between steps, a second replica,
or an operator's cancel or fail is simply what the next read finds. Keeping the decision
here, pure, means every path of the runner is tested without a server
(tests/unit/test_running.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus

__all__ = ["Step", "next_step", "next_to_run"]


class Step(StrEnum):
    START_ANALYSIS = "start_analysis"
    """PENDING: move to ANALYZING (announced), nothing else."""
    ANALYZE = "analyze"
    """ANALYZING: compute the impact; EXECUTING with a first attempt, or FAILED."""
    EXECUTE = "execute"
    """EXECUTING: run the attempt in hand (APPLIED, another attempt, or FAILED)."""
    FAIL_ATTEMPT = "fail_attempt"
    """EXECUTING, but the tree changed under every try of this attempt: end it FAILED
    (the next attempt, if any is left, starts from a fresh impact)."""
    FINISHED = "finished"
    """APPLIED, FAILED or CANCELLED: publish what is left in the outbox; stop."""


def next_step(status: CorrectionStatus, *, conflicts: int = 0,
              max_conflicts: int = 1) -> Step:
    """The step for a correction found in `status`, after `conflicts` consecutive
    ConcurrentChange retries of this run (`max_conflicts` of them end an attempt)."""
    if CORRECTION_LIFECYCLE.is_terminal(status):
        return Step.FINISHED
    if status is CorrectionStatus.PENDING:
        return Step.START_ANALYSIS
    if status is CorrectionStatus.ANALYZING:
        return Step.ANALYZE
    if status is CorrectionStatus.EXECUTING:
        return Step.FAIL_ATTEMPT if conflicts >= max_conflicts else Step.EXECUTE
    raise ValueError(f"no step for status {status!r}")  # a status added without a step


def next_to_run(statuses: Sequence[CorrectionStatus]) -> int:
    """Which of a plan's unfinished corrections (oldest arrival first) its runner works
    next: one already started (ANALYZING or EXECUTING) before any still PENDING, else the
    oldest arrival.

    A started correction is one whose runner died or lost its lease mid-way; finishing
    it first keeps a plan's corrections from running interleaved. A PENDING one that
    arrived earlier can only be here because its request was recorded after the started
    one began (its worker was killed before recording it): the known limit of several
    replicas (docs/corrections.md, Ordering): were the earlier arrival started while the
    started one waits, a takeover runner would run the two interleaved."""
    if not statuses:
        raise ValueError("no unfinished correction to run")
    for i, status in enumerate(statuses):
        if status in (CorrectionStatus.ANALYZING, CorrectionStatus.EXECUTING):
            return i
    return 0
