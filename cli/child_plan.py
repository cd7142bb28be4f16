"""The child plan an append's dry run forecasts, as text: where it would hang, what it
inherits and the invariants it would run under (the report's `child_plan`,
contracts.corrections.append_impact). Its warnings are printed with the report's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from cli.render import out

if TYPE_CHECKING:
    from contracts.corrections.append_impact import ChildPlanForecast

SHOWN = 20


def show_child_plan(f: ChildPlanForecast | None) -> None:
    if f is None:
        return
    inherits = ", ".join(f"{k} {escape(v)}" for k, v in
                         (("project", f.project), ("template", f.action_template)) if v)
    out.print(f"child plan: a new plan under {f.parent_plan_id}"
              + (f", inheriting {inherits}" if inherits else ""))
    unjudged = not f.judged and any(not i.checked for i in f.invariants)
    out.print(f"invariants it would run under: {f.invariants_count}"
              + (" (no judge: the word-only ones are reported by agents)" if unjudged else ""))
    for i in f.invariants[:SHOWN]:
        target = f" {escape(i.scope_target)}" if i.scope_target else ""
        gate = f"{i.severity}/{i.consequence}" + (" check" if i.checked else "")
        out.print(f"  {escape(i.name)}  {i.scope}{target}  {gate}")
    if f.invariants_count > SHOWN:
        out.print(f"  [dim]… and {f.invariants_count - SHOWN} more[/]")
    for p in f.blocked_by_plans[:SHOWN]:
        out.print(f"  [red]blocked by[/] unresolved error violations of plan {p}")
