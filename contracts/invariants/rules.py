"""The invariants as the recorder's gate sees them: one version of the stored set, its
checks compiled, and the checked or judged ones in force for each plan.

The store keeps a version number that every change of the set (an invariant added or
removed, a template applied to a plan) increments; the recorder reads it with each
batch's facts and loads the set again only when it moved, so a change is seen by the
next batch and costs nothing while nothing changes. A check that no longer compiles
when read back (a bound tightened since it was added) is not dropped: it stays in force
as a check that cannot be evaluated, which an error invariant treats as broken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from contracts.invariants.activation import PlanScope
from contracts.invariants.checks import CompiledCheck, InvalidCheck, compile_check
from contracts.invariants.model import Invariant
from contracts.invariants.precedence import effective_invariants


def compile_all(invariants: Iterable[Invariant]) -> dict[str, CompiledCheck | InvalidCheck]:
    """Each checked invariant's check compiled again, or why it no longer compiles."""
    out: dict[str, CompiledCheck | InvalidCheck] = {}
    for inv in invariants:
        if inv.check is None:
            continue
        try:
            out[inv.id] = compile_check(inv.check)
        except InvalidCheck as exc:
            out[inv.id] = exc
    return out


@dataclass(frozen=True, eq=False)
class RuleSet:
    """The stored invariants as of `version`. `judge`: word-only invariants are judged
    (a judge is configured); otherwise they stay reported by agents."""

    version: int
    invariants: tuple[Invariant, ...] = ()
    compiled: Mapping[str, CompiledCheck | InvalidCheck] = field(default_factory=dict)
    judge: bool = False
    _in_force: dict[tuple[object, ...], tuple[Invariant, ...]] = field(
        default_factory=dict, repr=False)

    @classmethod
    def of(cls, version: int, invariants: Iterable[Invariant], judge: bool = False) -> RuleSet:
        held = tuple(invariants)
        return cls(version, held, compile_all(held), judge)

    @property
    def gates(self) -> bool:
        """Whether anything can stop or hold a decision: a check, or a judged invariant."""
        return bool(self.compiled) or (self.judge and bool(self.invariants))

    def in_force(self, plan_id: str, scope: PlanScope,
                 ancestors: Sequence[str] = ()) -> tuple[Invariant, ...]:
        """The plan's effective invariants (scope precedence as for reconciliation) that
        the gate evaluates: those with a check, and with a judge the word-only ones."""
        key = (plan_id, scope, tuple(ancestors))
        held = self._in_force.get(key)
        if held is None:
            effective = effective_invariants(plan_id, scope.project, scope.action_template,
                                             self.invariants, ancestors)
            held = tuple(i for i in effective if i.check is not None or self.judge)
            self._in_force[key] = held
        return held

    def variables(self, invariants: Iterable[Invariant]) -> frozenset[str]:
        """The variables the checks of `invariants` read."""
        names: set[str] = set()
        for inv in invariants:
            check = self.compiled.get(inv.id)
            if isinstance(check, CompiledCheck):
                names |= check.variables
        return frozenset(names)

    def reads_path(self) -> bool:
        """Whether any check reads `path` (only then are the parents' paths read)."""
        return any(isinstance(c, CompiledCheck) and "path" in c.variables
                   for c in self.compiled.values())
