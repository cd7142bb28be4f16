"""`agents plan tree | explain | correct`: a plan as an operator reads it.

Reads go straight to MongoDB through the store's repositories (a read changes nothing,
so there is no reason to route it over NATS); `correct` lives in cli.correct.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli import correct, history
from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, console, dump, emit_json, short, status_text, when

if TYPE_CHECKING:
    from contracts.corrections.record import Correction
    from contracts.decisions.model import Decision
    from contracts.decisions.plans import PlanRecord

app = typer.Typer(help="Read a plan's decision tree and correct it.", no_args_is_help=True)
app.command("correct")(correct.correct)


async def _plan_records(ctx: Ctx, plan_ids: list[str]) -> dict[str, PlanRecord]:
    from store.read_model import plan_records  # noqa: PLC0415

    return await plan_records(ctx.db, plan_ids)


async def _corrections(ctx: Ctx, plan_id: str) -> list[Correction]:
    from store.read_model import plan_corrections  # noqa: PLC0415

    return await plan_corrections(ctx.db, plan_id)


def _markers(d: Decision, plans: dict[str, PlanRecord],
             corrections: list[Correction]) -> str:
    out = []
    if d.is_correction:
        out.append(f"[magenta]correction of {short(d.corrects_decision_id)}[/]")
    if d.superseded_by is not None:
        out.append(f"[red]superseded by {short(d.superseded_by)}[/]")
    for p in d.downstream_plan_ids:
        record = plans.get(p)
        out.append(f"[cyan]→ child plan {short(p)}[/]"
                   + (f" ({status_text(record.status.value)})" if record else ""))
    for c in corrections:
        if c.decision_id == d.decision_id:
            out.append(f"[yellow]{c.mode.value} {short(c.correction_id)}[/] "
                       f"({status_text(c.status.value)})")
    return ("  " + "  ".join(out)) if out else ""


def _label(d: Decision, plans: dict[str, PlanRecord], corrections: list[Correction]) -> str:
    conf = "-" if d.confidence_score is None else f"{d.confidence_score:.2f}"
    text = (f"[bold]{d.decision_type.value}[/] {escape(clip(d.chosen_option))}  "
            f"[dim]#{d.sequence_number} {short(d.decision_id)} conf {conf}[/]")
    if d.superseded_by is not None:
        text = f"[strike dim]{d.decision_type.value} {escape(clip(d.chosen_option))}[/]  " \
               f"[dim]#{d.sequence_number} {short(d.decision_id)}[/]"
    return text + _markers(d, plans, corrections)


def tree(
    plan_id: Annotated[str, typer.Argument(help="The plan (ULID).")],
    *,
    show_superseded: Annotated[bool, typer.Option(
        "--show-superseded", help="Also show superseded decisions, marked.")] = False,
    depth: Annotated[int | None, typer.Option(
        min=0, help="Levels below the root to show (0: the root only).")] = None,
    as_of: Annotated[str | None, typer.Option(
        "--as-of", metavar="TIME|CORRECTION_ID", help=history.AS_OF_HELP)] = None,
    before: Annotated[bool, typer.Option("--before", help=history.BEFORE_HELP)] = False,
    as_json: JsonFlag = False,
) -> None:
    """The plan's current decision tree: type, chosen option, sequence, short ID, confidence."""
    plan_id = parse_id(plan_id, "plan")
    moment = history.parse_as_of(as_of) if as_of is not None else None
    if moment is not None and show_superseded:
        fail("--as-of shows the tree current then; leave out --show-superseded", USAGE_ERROR)
    if before and moment is None:
        fail("--before goes with --as-of CORRECTION_ID", USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        from store.decisions import DecisionRepository  # noqa: PLC0415

        repo = DecisionRepository(ctx.db)
        decisions = await (repo.full_tree(plan_id) if show_superseded or moment is not None
                           else repo.current_tree(plan_id))
        if not decisions:
            fail(f"no decisions recorded for plan {plan_id}")
        corrections = await _corrections(ctx, plan_id)
        cut = None
        if moment is not None:
            cut = history.resolve_cut(moment, before, decisions, corrections)
            decisions, corrections = history.as_of(decisions, corrections, cut)
            if not decisions:
                fail(f"plan {plan_id} had no decisions {history.cut_text(cut)}")
        plans = await _plan_records(
            ctx, [p for d in decisions for p in d.downstream_plan_ids])
        ids = {d.decision_id for d in decisions}
        kids: dict[str | None, list[Decision]] = defaultdict(list)
        for d in decisions:
            parent = d.parent_decision_id if d.parent_decision_id in ids else None
            kids[parent].append(d)
        levels: dict[str, int] = {}
        stack = [(r, 0) for r in reversed(kids[None])]
        while stack:
            d, level = stack.pop()
            levels[d.decision_id] = level
            stack.extend((c, level + 1) for c in reversed(kids[d.decision_id]))
        shown = [d for d in decisions if depth is None or levels.get(d.decision_id, 0) <= depth]
        if as_json:
            emit_json({
                "plan_id": plan_id, "show_superseded": show_superseded, "depth": depth,
                **({"as_of": history.cut_json(cut)} if cut is not None else {}),
                "decisions": [{**dump(d), "depth": levels.get(d.decision_id, 0)}
                              for d in shown],
                "child_plans": [dump(r) for r in plans.values()],
                "corrections": [dump(c) for c in corrections],
            })
            return
        _print_tree(plan_id, kids, plans=plans, corrections=corrections, depth=depth,
                    total=len(decisions), show_superseded=show_superseded,
                    as_of=history.cut_text(cut) if cut is not None else None)

    run(body)


def _print_tree(plan_id: str, kids: dict[str | None, list[Decision]], *,
                plans: dict[str, PlanRecord], corrections: list[Correction],
                depth: int | None, total: int, show_superseded: bool,
                as_of: str | None = None) -> None:
    from rich.tree import Tree  # noqa: PLC0415

    which = f"tree {as_of}" if as_of else ("full" if show_superseded else "current") + " tree"
    top = Tree(f"[bold]plan {plan_id}[/]  [dim]{which}, {total} decision(s)[/]")

    def label(d: Decision) -> str:
        if as_of is None or d.superseded_by is None:
            return _label(d, plans, corrections)
        # Current then: drawn as current, with what replaced it since.
        then = _label(d.model_copy(update={"superseded_by": None}), plans, corrections)
        return then + f"  [dim]later superseded by {short(d.superseded_by)}[/]"

    def count_below(decision_id: str) -> int:
        return sum(1 + count_below(c.decision_id) for c in kids[decision_id])

    stack: list[tuple[Tree, Decision, int]] = [(top, r, 0) for r in reversed(kids[None])]
    while stack:
        branch, d, level = stack.pop()
        node = branch.add(label(d))
        below = kids[d.decision_id]
        if depth is not None and level >= depth:
            if below:
                node.add(f"[dim]… {count_below(d.decision_id)} more below[/]")
            continue
        stack.extend((node, c, level + 1) for c in reversed(below))
    console.print(top)
    if corrections:
        console.print(f"corrections: {len(corrections)} "
                      "[dim](agents correction list --plan {plan_id})[/]".replace(
                          "{plan_id}", plan_id))


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
    and how corrections touched it."""
    decision_id = parse_id(decision_id, "decision")

    async def body(ctx: Ctx) -> None:
        from store.read_model import explain as read  # noqa: PLC0415

        found = await read(ctx.db, decision_id)
        if found is None:
            fail(f"no decision {decision_id} is recorded")
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
                "path": [_brief(p) for p in path],
                "children": [_brief(c) for c in children],
                "downstream_decisions": [_brief(x) for x in dependents],
                "child_plans": [
                    {"plan_id": p, **({"status": plans[p].status.value} if p in plans else {})}
                    for p in d.downstream_plan_ids],
                "corrections": [dump(c) for c in touching],
            })
            return
        _print_explain(d, path)
        _print_downstream(d, children, dependents, plans)
        _print_corrections(d, touching)
        if show_context:
            _print_context(d)
        if show_reasoning:
            console.print("\n[bold]actor reasoning[/]")
            console.print(escape(d.actor_reasoning or "-"))

    run(body)


def _brief(d: Decision) -> dict[str, Any]:
    return {"decision_id": d.decision_id, "decision_type": d.decision_type.value,
            "sequence_number": d.sequence_number, "chosen_option": d.chosen_option,
            "superseded_by": d.superseded_by}


def _print_explain(d: Decision, path: list[Decision]) -> None:
    from rich.table import Table  # noqa: PLC0415

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
    console.print(grid)
    console.print("\n[bold]path from the root[/]")
    for i, p in enumerate([*path, d]):
        console.print(f"  {'  ' * i}{p.decision_type.value} {escape(clip(p.chosen_option, 50))} "
                      f"[dim]#{p.sequence_number} {short(p.decision_id)}[/]")
    console.print("\n[bold]alternatives considered[/]")
    for alt in d.alternatives_considered or ["-"]:
        console.print(f"  - {escape(alt)}")


def _print_downstream(d: Decision, children: list[Decision], dependents: list[Decision],
                      plans: dict[str, PlanRecord]) -> None:
    console.print("\n[bold]downstream[/]")
    for c in children:
        mark = f" [red]superseded by {short(c.superseded_by)}[/]" if c.superseded_by else ""
        console.print(f"  child {c.decision_type.value} {escape(clip(c.chosen_option, 50))} "
                      f"[dim]{short(c.decision_id)}[/]{mark}")
    for x in dependents:
        console.print(f"  dependent {x.decision_type.value} [dim]{short(x.decision_id)}[/]")
    for p in d.downstream_plan_ids:
        status = status_text(plans[p].status.value) if p in plans else "[dim]no record[/]"
        console.print(f"  child plan {p} ({status})")
    for a in d.artifacts_produced:
        console.print(f"  artifact {a.artifact_type} {escape(a.artifact_path)}")
    if not (children or dependents or d.downstream_plan_ids or d.artifacts_produced):
        console.print("  [dim]nothing[/]")


def _print_corrections(d: Decision, touching: list[Correction]) -> None:
    if not touching:
        return
    console.print("\n[bold]corrections[/]")
    for c in touching:
        role = "target" if c.decision_id == d.decision_id else "result"
        console.print(f"  {c.correction_id} {c.mode.value} ({role}) "
                      f"{status_text(c.status.value)} by {escape(c.requested_by)}: "
                      f"{escape(clip(c.guidance, 50))}")


def _print_context(d: Decision) -> None:
    s = d.context_snapshot
    console.print("\n[bold]context snapshot[/]")
    console.print(f"  hot context hash {s.hot_context_hash}")
    console.print(f"  hot context ref  {escape(str(s.hot_context_ref))}")
    console.print(f"  actor state ref  {escape(str(s.actor_state_ref))}")
    for r in s.relevant_resources:
        console.print(f"  resource {escape(str(r.resource_id))} {escape(str(r.path))}")


app.command("tree")(tree)
app.command("explain")(explain)
