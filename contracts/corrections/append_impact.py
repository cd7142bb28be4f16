"""What an append would start: the child plan it creates and the invariants that child
will run under, with the warnings an operator should read first.

A revert's impact is what it removes (contracts.impact); an append removes nothing, so
its impact is what it adds. The child plan inherits its parent plan's project and
template, and is bound by the PLAN invariants of its parent and their ancestors
(docs/invariants.md, Plan lineage): `invariants` is that effective set, computed like a
new plan's. The dry run reports it; the execution computes it again and writes it into
the child root's rationale, so the tree records what the child started under.
"""

from __future__ import annotations

from pydantic import Field

from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid

NOTE_NAMES = 10
"""Invariants named in the child root's rationale (the rest are counted)."""


class InvariantInForce(Frozen):
    """One invariant the child plan will run under."""

    id: Ulid
    name: str
    scope: str = Field(description="PLAN (of an ancestor), ACTION, PROJECT or GLOBAL.")
    scope_target: str | None = None
    severity: str = Field(description="error, warning or info.")
    checked: bool = Field(description="True: it has a check the recorder evaluates on every "
                          "decision; False: written only in words.")
    consequence: str = Field(description="refuse, hold or record: what a breaking "
                             "decision gets.")


class ChildPlanForecast(Frozen):
    """The child plan an append would create."""

    parent_plan_id: Ulid = Field(description="The target's plan.")
    spawned_from_decision_id: Ulid = Field(description="The target.")
    project: str | None = Field(default=None, description="Inherited from the parent plan.")
    action_template: str | None = Field(default=None, description="Inherited too.")
    invariants: list[InvariantInForce] = Field(
        default_factory=list, description=f"The invariants in force for it, by name (the "
        f"first {INLINE_IDS_MAX}).")
    invariants_count: int = Field(default=0, ge=0)
    judged: bool = Field(default=False, description="Whether a judge rules on the word-only "
                         "ones (JUDGE_URL); otherwise agents report their violations.")
    blocked_by_plans: list[Ulid] = Field(
        default_factory=list, description="Plans of its lineage with unresolved error "
        "violations: its Execute-phase decisions would be refused until they are resolved.")


def forecast_warnings(f: ChildPlanForecast) -> list[str]:
    """What an operator should know before the child plan starts."""
    warnings: list[str] = []
    if f.blocked_by_plans:
        warnings.append(
            f"The child plan would start blocked: plan(s) {', '.join(f.blocked_by_plans[:5])} "
            "of its lineage have unresolved error violations, so its Execute-phase decisions "
            "are refused until they are resolved (agents invariant violations --unresolved).")
    checked = [i for i in f.invariants if i.checked]
    if checked:
        stopping = [i.name for i in checked if i.consequence != "record"]
        warnings.append(
            f"{len(checked)} checked invariant(s) will evaluate the child plan's decisions"
            + (f"; {', '.join(stopping[:5])} can refuse or hold them." if stopping else "."))
    words = [i.name for i in f.invariants if not i.checked]
    if words and not f.judged:
        warnings.append(f"{len(words)} invariant(s) written only in words bind the child "
                        f"plan ({', '.join(words[:5])}); no judge is configured, so only "
                        "its agents' reports enforce them.")
    return warnings


def forecast_note(f: ChildPlanForecast) -> str:
    """One sentence for the child root's rationale: what it started under."""
    if not f.invariants_count:
        return "It started under no invariant."
    names = ", ".join(f"{i.name} ({i.scope.lower()}{', checked' if i.checked else ''})"
                      for i in f.invariants[:NOTE_NAMES])
    more = f" and {f.invariants_count - NOTE_NAMES} more" \
        if f.invariants_count > NOTE_NAMES else ""
    blocked = " Its lineage is blocked by unresolved error violations." \
        if f.blocked_by_plans else ""
    return f"It started under {f.invariants_count} invariant(s): {names}{more}.{blocked}"
