"""`agents plan explain`: one decision in full, as the console's decision panel shows it
(both read services.read_model.explain)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import fail
from cli.render import JsonFlag, clip, dump, emit_json, out, short, status_text, when

if TYPE_CHECKING:
    from contracts.corrections.record import Correction
    from contracts.decisions.comments import Comment
    from contracts.decisions.model import Decision
    from contracts.decisions.plans import PlanRecord


def explain(
    decision_id: Annotated[str, typer.Argument(help="The decision (ULID).")],
    *,
    show_context: Annotated[bool, typer.Option(
        "--show-context", help="Also show the context snapshot.")] = False,
    show_reasoning: Annotated[bool, typer.Option(
        "--show-reasoning", help="Also show the actor's raw reasoning.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """One decision in full: its path from the root, alternatives, what depends on it,
    how corrections touched it, and the comments on it."""
    decision_id = parse_id(decision_id, "decision")

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind
        from services.read_model import explain as read

        wanted = await ctx.resolve(decision_id, IdKind.DECISION)
        found = await read(ctx.reads, wanted)
        if found is None:
            fail(f"no decision {wanted} is recorded")
        comments = await ctx.reads.views.comments(wanted)
        d, path, children = found.decision, found.path, found.children
        dependents, plans, touching = found.dependents, found.child_plans, found.corrections
        hidden = set()
        if not show_context:
            hidden.add("context_snapshot")
        if not show_reasoning:
            hidden.add("actor_reasoning")
        if as_json:
            emit_json({
                "decision": dump(d, exclude=hidden),
                "recorded_by": found.recorded_by,
                "path": [_brief(p) for p in path],
                "children": [_brief(c) for c in children],
                "downstream_decisions": [_brief(x) for x in dependents],
                "child_plans": [
                    {"plan_id": p, **({"status": plans[p].status.value} if p in plans else {})}
                    for p in d.downstream_plan_ids],
                "corrections": [dump(c) for c in touching],
                "comments": [dump(c) for c in comments],
            })
            return
        _print_explain(d, path, found.recorded_by)
        _print_downstream(d, children, dependents, plans)
        _print_corrections(d, touching)
        _print_comments(comments)
        if show_context:
            _print_context(d)
        if show_reasoning:
            out.print("\n[bold]actor reasoning[/]")
            out.print(escape(d.actor_reasoning or "-"))

    run(body)


def _brief(d: Decision) -> dict[str, Any]:
    return {"decision_id": d.decision_id, "decision_type": d.decision_type.value,
            "sequence_number": d.sequence_number, "chosen_option": d.chosen_option,
            "superseded_by": d.superseded_by}


def _print_explain(d: Decision, path: list[Decision], recorded_by: str | None) -> None:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()

    def row(name: str, value: Any) -> None:
        grid.add_row(name, escape(str(value)) if value not in (None, "") else "[dim]-[/]")

    row("decision", d.decision_id)
    row("plan", d.plan_id)
    row("type", f"{d.decision_type.value} ({d.decision_type.phase.value})")
    row("sequence", d.sequence_number)
    row("question", d.question)
    row("chosen", d.chosen_option)
    row("confidence", d.confidence_score)
    row("rationale", d.rationale)
    row("created", when(d.created_at))
    row("recorded by", recorded_by or "unverified (recorded unsigned)")
    row("agent", f"{d.agent.name} {d.agent.version or ''}".strip() + " (as it says)"
        if d.agent else None)
    row("model", f"{d.model.provider} {d.model.name}" if d.model else None)
    status = "current"
    if d.superseded_by:
        status = f"superseded by {d.superseded_by}"
        if d.superseded_by_correction:
            status += f" (correction {d.superseded_by_correction}, {when(d.superseded_at)})"
    row("status", status)
    if d.is_correction:
        row("corrects", d.corrects_decision_id)
        row("correction reason", d.correction_reason)
    if d.project or d.action_template:
        row("project", d.project)
        row("action template", d.action_template)
    out.print(grid)
    out.print("\n[bold]path from the root[/]")
    for i, p in enumerate([*path, d]):
        out.print(f"  {'  ' * i}{p.decision_type.value} {escape(clip(p.chosen_option, 50))} "
                  f"[dim]#{p.sequence_number} {short(p.decision_id)}[/]")
    out.print("\n[bold]alternatives considered[/]")
    for alt in d.alternatives_considered or ["-"]:
        out.print(f"  - {escape(alt)}")


def _print_downstream(d: Decision, children: list[Decision], dependents: list[Decision],
                      plans: dict[str, PlanRecord]) -> None:
    out.print("\n[bold]downstream[/]")
    for c in children:
        mark = f" [red]superseded by {short(c.superseded_by)}[/]" if c.superseded_by else ""
        out.print(f"  child {c.decision_type.value} {escape(clip(c.chosen_option, 50))} "
                  f"[dim]{short(c.decision_id)}[/]{mark}")
    for x in dependents:
        out.print(f"  dependent {x.decision_type.value} [dim]{short(x.decision_id)}[/]")
    for p in d.downstream_plan_ids:
        status = status_text(plans[p].status.value) if p in plans else "[dim]no record[/]"
        out.print(f"  child plan {p} ({status})")
    for a in d.artifacts_produced:
        out.print(f"  artifact {a.artifact_type} {escape(a.artifact_path)}")
    if not (children or dependents or d.downstream_plan_ids or d.artifacts_produced):
        out.print("  [dim]nothing[/]")


def _print_corrections(d: Decision, touching: list[Correction]) -> None:
    if not touching:
        return
    out.print("\n[bold]corrections[/]")
    for c in touching:
        role = "target" if c.decision_id == d.decision_id else "result"
        out.print(f"  {c.correction_id} {c.mode.value} ({role}) "
                  f"{status_text(c.status.value)} by {escape(c.requester)}: "
                  f"{escape(clip(c.guidance, 50))}")


def _print_comments(comments: list[Comment]) -> None:
    if not comments:
        return
    out.print("\n[bold]comments[/]")
    for c in comments:
        who = c.author if c.verified else f"{c.author} (unverified)" \
            if c.author != "unverified" else "unverified"
        out.print(f"  {when(c.created_at)} {escape(who)}: {escape(c.text)}")


def _print_context(d: Decision) -> None:
    s = d.context_snapshot
    out.print("\n[bold]context snapshot[/]")
    out.print(f"  hot context hash {s.hot_context_hash}")
    out.print(f"  hot context ref  {escape(str(s.hot_context_ref))}")
    out.print(f"  actor state ref  {escape(str(s.actor_state_ref))}")
    for r in s.relevant_resources:
        out.print(f"  resource {escape(str(r.resource_id))} {escape(str(r.path))}")
