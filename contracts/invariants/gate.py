"""The recorder's gate: every decision of a batch that passed the tree rules is held to its
plan's checked invariants before it is accepted.

`triage_batch` calls `Gate.admit` with each decision last, in write order (a parent
before its children). It answers a refusal (the rule that refuses the decision) or None
(accept); what it decided for the decisions it accepts or refuses is in `outcomes` and
`holds`, which the recorder writes in the batch's transaction
(contracts.invariants.outcomes). Pure: the stored facts come in `GateInputs`, read with
the batch's.

Per decision (not the roots, not invariant_enforced decisions: the ledger's own):

1. the phase rule for what the stored violations do not cover: the plan's pending
   approvals, and the error violations this very batch found before;
2. each invariant in force with a check: kept, broken, or unevaluated (an error of
   the expression on this decision, a list over the bound, the batch's budget spent);
3. with a judge configured, each word-only invariant in force: the decision is held
   awaiting the judge (services.judging rules on it after it is recorded).

A broken or unevaluated invariant gives the decision its consequence: refuse (an error
invariant's default) refuses it, hold records it awaiting approval, record (warning,
info) records it. Unevaluated counts as broken: an error invariant never lets through
what it could not check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.invariants.activation import InputTooLarge, PlanScope, activation
from contracts.invariants.approvals import decision_digest
from contracts.invariants.blocking import PhaseBlocked, check_not_blocked
from contracts.invariants.checks import CompiledCheck
from contracts.invariants.evaluation import Budget, Evaluation, Verdict
from contracts.invariants.holds import Hold, HoldReason, HoldStatus
from contracts.invariants.model import Invariant
from contracts.invariants.outcomes import Outcome, derived_id
from contracts.invariants.rules import RuleSet
from contracts.invariants.severity import Consequence, Severity
from contracts.invariants.violations import FoundBy
from contracts.shared.rules import Rule, RuleViolation

UNCHECKED = frozenset({DecisionType.PROMPT_DEFINITION, DecisionType.INVARIANT_ENFORCED})
"""Never evaluated: a root has no tree to hang a refusal on, and invariant_enforced
decisions are the ledger's record of evaluations (judging them would never end)."""


@dataclass(frozen=True)
class GateInputs:
    """What the store said for a batch: the rule set, and of the batch's plans their
    project and template, their ancestors, their pending approvals, and the type chains
    (root first, the decision last) of the stored parents."""

    rules: RuleSet
    scopes: Mapping[str, PlanScope] = field(default_factory=dict)
    ancestors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    approvals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    chains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Gate:
    def __init__(self, inputs: GateInputs, budget: Budget,
                 memo: dict[tuple[str, str], Evaluation] | None = None) -> None:
        self._in = inputs
        self._budget = budget
        self._memo = memo if memo is not None else {}
        self._scopes = dict(inputs.scopes)
        self.chains: dict[str, tuple[str, ...]] = {}
        """Type chains of the decisions accepted here (the recorder caches them)."""
        self._blocked: dict[str, list[str]] = {}
        self.outcomes: list[Outcome] = []
        self.holds: list[Hold] = []

    def admit(self, d: Decision) -> RuleViolation | None:
        if d.is_root:
            self._scopes[d.plan_id] = PlanScope(d.project, d.action_template)
        try:
            check_not_blocked(d.plan_id, d.decision_type, self._blocked,
                              self._in.ancestors.get(d.plan_id, ()), self._in.approvals)
        except PhaseBlocked as exc:
            return RuleViolation(rule=Rule.RECONCILIATION_BLOCKED, field="decision_type",
                                 message=str(exc))
        refusal = None if d.decision_type in UNCHECKED else self._judge(d)
        chain = self._chain(d.parent_decision_id)
        if refusal is None and chain is not None:
            self.chains[d.decision_id] = (*chain, d.decision_type.value)
        return refusal

    def _chain(self, decision_id: str | None) -> tuple[str, ...] | None:
        if decision_id is None:
            return ()
        return self.chains.get(decision_id) or self._in.chains.get(decision_id)

    def _judge(self, d: Decision) -> RuleViolation | None:
        scope = self._scopes.get(d.plan_id, PlanScope())
        ancestors = self._in.ancestors.get(d.plan_id, ())
        in_force = self._in.rules.in_force(d.plan_id, scope, ancestors)
        if not in_force:
            return None
        checked = [i for i in in_force if i.check is not None]
        failing = self._evaluate(d, checked, scope) if checked else []
        words = [i for i in in_force if i.check is None]
        return self._settle(d, failing, words)

    def _evaluate(self, d: Decision, checked: Sequence[Invariant],
                  scope: PlanScope) -> list[tuple[Invariant, Evaluation]]:
        context, missing = self._context(d, checked, scope)
        out = []
        for inv in checked:
            key = (d.decision_id, inv.id)
            ev = self._memo.get(key)
            if ev is None:
                ev = self._memo[key] = self._one(inv, context, missing)
            if ev.verdict is not Verdict.KEPT:
                out.append((inv, ev))
        return out

    def _context(self, d: Decision, checked: Sequence[Invariant],
                 scope: PlanScope) -> tuple[Any, dict[str, str]]:
        """The values the checks read, as one CEL context, and why any variable could not
        be read (only the checks that read it are then unevaluated)."""
        names = set(self._in.rules.variables(checked))
        missing: dict[str, str] = {}
        chain = self._chain(d.parent_decision_id) if "path" in names else ()
        if chain is None:
            missing["path"] = ("the decision's path from the root is not known (a parent "
                               "outside the stored tree)")
            chain = ()
        values: dict[str, Any] = {}
        for name in sorted(names - missing.keys()):
            try:
                values |= activation(d, [name], chain, scope)
            except InputTooLarge as exc:
                missing[name] = f"input_too_large: {exc}"
        import cel  # only once a check runs (contracts.invariants.checks says why)

        return cel.Context(values), missing

    def _one(self, inv: Invariant, context: Any, missing: dict[str, str]) -> Evaluation:
        check = self._in.rules.compiled.get(inv.id)
        if not isinstance(check, CompiledCheck):
            return Evaluation(Verdict.UNEVALUATED, f"its check no longer compiles: {check}")
        unread = sorted(check.variables & missing.keys())
        if unread:
            return Evaluation(Verdict.UNEVALUATED, missing[unread[0]])
        return self._budget.run(check, context)

    def _settle(self, d: Decision, failing: Sequence[tuple[Invariant, Evaluation]],
                words: Sequence[Invariant]) -> RuleViolation | None:
        outcomes = [Outcome(d, inv, ev, inv.outcome) for inv, ev in failing]
        refused = [o for o in outcomes if o.consequence is Consequence.REFUSE]
        if refused:
            outcomes = [Outcome(d, o.invariant, o.evaluation, Consequence.REFUSE)
                        for o in outcomes]
        self.outcomes += outcomes
        self._blocked.setdefault(d.plan_id, []).extend(
            derived_id(d.decision_id, o.invariant.id, o.kind, "violation")
            for o in outcomes if o.invariant.severity is Severity.ERROR)
        if refused:
            return _refusal(refused)
        held = [o for o in outcomes if o.consequence is Consequence.HOLD]
        if held or words:
            self.holds.append(_hold(d, held, words))
        return None


def _refusal(refused: Sequence[Outcome]) -> RuleViolation:
    broken = [o for o in refused if o.evaluation.verdict is Verdict.BROKEN]
    rule = Rule.INVARIANT_VIOLATED if broken else Rule.INVARIANT_UNEVALUATED
    first = (broken or refused)[0]
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return RuleViolation(
        rule=rule, field="decision_type",
        message=f"invariant {first.invariant.name} ({first.invariant.id}) refuses this "
        f"{first.decision.decision_type.value}: {first.evaluation.detail}{more}; see "
        f"agents invariant violations --plan {first.decision.plan_id}")


def _hold(d: Decision, held: Sequence[Outcome], words: Sequence[Invariant]) -> Hold:
    at: datetime = d.created_at
    reasons = [HoldReason(invariant_id=o.invariant.id, invariant_name=o.invariant.name,
                          severity=o.invariant.severity, consequence=o.consequence,
                          found_by=FoundBy.CHECK, detail=o.evaluation.detail[:1000])
               for o in held]
    status = HoldStatus.AWAITING_APPROVAL if held else HoldStatus.AWAITING_JUDGE
    return Hold(decision_id=d.decision_id, plan_id=d.plan_id, status=status, reasons=reasons,
                judge_invariant_ids=[] if held else [i.id for i in words],
                digest=decision_digest(d), created_at=at, updated_at=at)
