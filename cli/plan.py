"""`agents plan tree | explain | correct`: a plan as an operator reads it.

Reads go through the read port (services/read_ports.py: a read changes nothing, so
there is no reason to route it over NATS); `explain` lives in cli.explain, `correct` in
cli.correct.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from cli import correct, explain, history, plan_use
from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, dump, emit_json, out, short, status_text

if TYPE_CHECKING:
    from contracts.corrections.record import Correction
    from contracts.decisions.model import Decision
    from contracts.decisions.plans import PlanRecord

app = typer.Typer(help="Read a plan's decision tree and correct it.", no_args_is_help=True)
app.command("correct")(correct.correct)


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
        from services.read_model import plan_corrections, plan_records

        reads = ctx.reads
        decisions = await (reads.decisions.full_tree(plan_id)
                           if show_superseded or moment is not None
                           else reads.decisions.current_tree(plan_id))
        if not decisions:
            fail(f"no decisions recorded for plan {plan_id}")
        corrections = await plan_corrections(reads, plan_id)
        cut = None
        if moment is not None:
            cut = history.resolve_cut(moment, before, decisions, corrections)
            decisions, corrections = history.as_of(decisions, corrections, cut)
            if not decisions:
                fail(f"plan {plan_id} had no decisions {history.cut_text(cut)}")
        plans = await plan_records(reads, [p for d in decisions for p in d.downstream_plan_ids])
        kids, levels = _shape(decisions)
        if as_json:
            shown = [d for d in decisions
                     if depth is None or levels.get(d.decision_id, 0) <= depth]
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


def _shape(decisions: list[Decision]
           ) -> tuple[dict[str | None, list[Decision]], dict[str, int]]:
    """Children by parent (None: the tops, whose parent is not among them) and each
    decision's depth below its top."""
    ids = {d.decision_id for d in decisions}
    kids: dict[str | None, list[Decision]] = defaultdict(list)
    for d in decisions:
        kids[d.parent_decision_id if d.parent_decision_id in ids else None].append(d)
    levels: dict[str, int] = {}
    stack = [(r, 0) for r in reversed(kids[None])]
    while stack:
        d, level = stack.pop()
        levels[d.decision_id] = level
        stack.extend((c, level + 1) for c in reversed(kids[d.decision_id]))
    return kids, levels


def _print_tree(plan_id: str, kids: dict[str | None, list[Decision]], *,
                plans: dict[str, PlanRecord], corrections: list[Correction],
                depth: int | None, total: int, show_superseded: bool,
                as_of: str | None = None) -> None:
    from rich.tree import Tree

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
    out.print(top)
    if corrections:
        out.print(f"corrections: {len(corrections)} "
                  "[dim](agents correction list --plan {plan_id})[/]".replace(
                          "{plan_id}", plan_id))


app.command("tree")(tree)
app.command("explain")(explain.explain)
app.command("use")(plan_use.use)
