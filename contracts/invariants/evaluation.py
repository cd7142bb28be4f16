"""Evaluating one check against one decision: kept, broken, or not evaluated (and why).

Never raises: whatever the library raises (a missing key, a type without an overload,
a bad regular expression, a list over the bound) is the `unevaluated` outcome with its
reason, which the gate treats by the invariant's severity (an error invariant fails
closed). `Budget` bounds a batch's evaluation time: once spent, the batch's remaining
evaluations are `unevaluated` without running (one evaluation cannot be interrupted,
but each is bounded by the check's and the data's bounds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from contracts.invariants.checks import CompiledCheck

DETAIL_MAX = 300


class Verdict(StrEnum):
    KEPT = "kept"
    BROKEN = "broken"
    UNEVALUATED = "unevaluated"


@dataclass(frozen=True, slots=True)
class Evaluation:
    verdict: Verdict
    detail: str = ""


def evaluate(check: CompiledCheck, context: Any) -> Evaluation:
    """`check` on a decision whose values are `context` (a cel.Context holding at least
    the check's variables)."""
    try:
        result = check.program.execute(context)
    except Exception as exc:  # the expression's failure on this decision: an outcome
        return Evaluation(Verdict.UNEVALUATED, _reason(exc))
    if result is True:
        return Evaluation(Verdict.KEPT)
    if result is False:
        return Evaluation(Verdict.BROKEN, f"check is false: {_clip(check.source)}")
    return Evaluation(Verdict.UNEVALUATED,
                      f"the check gave {type(result).__name__}, not true or false")


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return _clip(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _clip(text: str) -> str:
    return text if len(text) <= DETAIL_MAX else text[:DETAIL_MAX - 1] + "…"


@dataclass
class Budget:
    """CPU seconds of evaluation one batch may spend (its triage may run more than once:
    the budget is the batch's). CPU time of this process, not the wall clock: the other
    processes of a loaded machine do not spend it."""

    seconds: float
    spent: float = 0.0
    evaluations: int = 0
    _clock: Any = field(default=time.process_time, repr=False)

    @property
    def left(self) -> bool:
        return self.spent < self.seconds

    def run(self, check: CompiledCheck, context: Any) -> Evaluation:
        if not self.left:
            return Evaluation(Verdict.UNEVALUATED,
                              f"the batch spent its evaluation budget ({self.seconds:g}s of "
                              "CPU, INVARIANT_EVAL_BUDGET_MS per decision); send the "
                              "decision again")
        started = self._clock()
        try:
            return evaluate(check, context)
        finally:
            self.spent += self._clock() - started
            self.evaluations += 1
