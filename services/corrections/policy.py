"""How hard the runner tries, and what it does about each kind of failure: the policy's
bounds and the pure decision from an exception to an outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from contracts.shared.persistence import ConcurrentChange, LeaseLost, StoreFailure

CrashHook = Callable[[str], None]
"""Called with a step name at each point a process could die; tests kill the worker there."""


def no_crash(step: str) -> None:
    """The production hook: nothing."""


class AnalysisFailed(Exception):
    """The analysis of a correction failed for a reason a later try may not meet; the
    runner pauses and tries again, up to policy.max_attempts, then FAILs it."""


class PlanBusy(Exception):
    """Another runner holds the plan's lease; its corrections will be run by that runner."""

    def __init__(self, plan_id: str) -> None:
        self.plan_id = plan_id
        super().__init__(f"plan {plan_id} is being corrected by another runner")


@dataclass(frozen=True)
class CorrectionPolicy:
    max_attempts: int = 3
    """Attempts at the revert/append (or at the analysis) before the correction is FAILED."""
    attempt_backoff_seconds: float = 0.2
    max_decisions: int = 10_000
    """Largest number of decisions one correction may touch (CORRECTIONS_MAX_DECISIONS)."""
    conflict_backoff_seconds: float = 0.05
    """Pause after the first concurrent change; doubled each round up to the max."""
    conflict_backoff_max_seconds: float = 2.0
    max_conflicts: int = 10
    """Concurrent changes in a row before the attempt is FAILED (about 10 s of rounds)."""

    def conflict_backoff(self, rounds: int) -> float:
        """The pause before reading again after `rounds` concurrent changes in a row."""
        grown = self.conflict_backoff_seconds * 2.0 ** max(rounds - 1, 0)
        return min(grown, self.conflict_backoff_max_seconds)


class Outcome(StrEnum):
    """What the runner does about an exception raised by a step."""

    LEASE_LOST = "lease_lost"
    """Another runner took the plan: stop; it carries on."""
    READ_AGAIN = "read_again"
    """The correction or the tree changed under us: read it again, recompute the impact."""
    RETRY_LATER = "retry_later"
    """The database failed a read: nothing was committed, the request is redelivered."""
    FAIL_ATTEMPT = "fail_attempt"
    """Anything else (the archive, a document too large, the transaction itself): a retry
    in place would meet it again, so the attempt ends FAILED with the error."""


def outcome_of(exc: BaseException, *, committing: bool) -> Outcome:
    """Decide, from the exception alone, how a failed step ends (pure: unit-tested).

    `committing`: the exception came from building or committing the step's writes
    (the archive copy, the transaction), not from the reads before them.
    """
    if isinstance(exc, LeaseLost):
        return Outcome.LEASE_LOST
    if isinstance(exc, ConcurrentChange):
        return Outcome.READ_AGAIN
    if isinstance(exc, StoreFailure) and not committing:
        return Outcome.RETRY_LATER
    return Outcome.FAIL_ATTEMPT


def describe(exc: BaseException) -> str:
    """One line for the record: the exception's type and message (bounded later)."""
    return f"{type(exc).__name__}: {exc}"
