"""`agents plan tree | explain | correct | list | export | comment | complete |
abandon`: a plan as an operator reads it, and what an operator does to it.

Reads go through the read port (services/read_ports.py: a read changes nothing, so
there is no reason to route it over NATS); `explain` lives in cli.explain, `correct` in
cli.correct, `list` and `export` in cli.plan_list, the rest in cli.upkeep.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from cli import correct, explain, history, plan_list, plan_use, upkeep
from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, dump, emit_json, ids, out, piped, short
from cli.tree_text import node_label

if TYPE_CHECKING:
    from contracts.corrections.record import Correction
    from contracts.decisions.model import Decision
    from contracts.decisions.plans import PlanRecord

app = typer.Typer(help="List, read, correct, comment on and end plans.",
                  no_args_is_help=True)
app.command("list")(plan_list.list_)
app.command("correct")(correct.correct)


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
    full_ids: Annotated[bool, typer.Option(
        "--full-ids", help="Whole IDs on a terminal too (a pipe always gets them whole).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The plan's current decision tree: type, chosen option, sequence, ID, confidence."""
    plan_id = parse_id(plan_id, "plan")
    moment = history.parse_as_of(as_of) if as_of is not None else None
    if moment is not None and show_superseded:
        fail("--as-of shows the tree current then; leave out --show-superseded", USAGE_ERROR)
    if before and moment is None:
        fail("--before goes with --as-of CORRECTION_ID", USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind
        from services.read_model import plan_corrections, plan_records

        reads = ctx.reads
        wanted = await ctx.resolve(plan_id, IdKind.PLAN, IdKind.DECISION, IdKind.CORRECTION)
        decisions = await (reads.decisions.full_tree(wanted)
                           if show_superseded or moment is not None
                           else reads.decisions.current_tree(wanted))
        if not decisions:
            await _no_tree(ctx, wanted)
        corrections = await plan_corrections(reads, wanted)
        cut = then = None
        if moment is not None:
            cut = history.resolve_cut(await history.moment_id(ctx, moment), before,
                                      decisions, corrections)
            then = history.cut_moment(cut, decisions, corrections)
            decisions, corrections = history.as_of(decisions, corrections, cut)
            if not decisions:
                fail(f"plan {wanted} had no decisions {history.cut_text(cut)}")
        plans = await plan_records(reads, [p for d in decisions for p in d.downstream_plan_ids])
        kids, levels = _shape(decisions)
        if as_json:
            shown = [d for d in decisions
                     if depth is None or levels.get(d.decision_id, 0) <= depth]
            emit_json({
                "plan_id": wanted, "show_superseded": show_superseded, "depth": depth,
                **({"as_of": history.cut_json(cut)} if cut is not None else {}),
                "decisions": [{**dump(d), "depth": levels.get(d.decision_id, 0)}
                              for d in shown],
                "child_plans": [dump(r) for r in plans.values()],
                "corrections": [dump(c) for c in corrections],
            })
            return
        ids.shorten = not (full_ids or piped())
        _print_tree(wanted, kids, plans=plans, corrections=corrections, depth=depth,
                    total=len(decisions), show_superseded=show_superseded,
                    as_of=history.cut_text(cut) if cut is not None else None,
                    moment=then)

    run(body)


async def _no_tree(ctx: Ctx, wanted: str) -> NoReturn:
    """Why there is no tree to draw, in the words that help: the ID is a decision's or
    a correction's, or the plan's decisions are all superseded (rolled back)."""
    from services.read_model import find

    found = await find(ctx.reads, wanted)
    if found.kind == "decision":
        fail(f"{wanted} is a decision of plan {found.plan_id}, not a plan: "
             f"agents plan tree {found.plan_id}  (or agents plan explain {wanted})")
    if found.kind == "correction":
        fail(f"{wanted} is a correction of plan {found.plan_id}, not a plan: "
             f"agents plan tree {found.plan_id} --as-of {wanted}")
    record = await ctx.reads.plans.get(wanted)
    every = await ctx.reads.decisions.full_tree(wanted)
    if every:
        why = (f"it was rolled back by correction {record.rolled_back_by}"
               if record is not None and record.rolled_back_by else "")
        fail(f"plan {wanted} has no current decision: all {len(every)} are superseded"
             + (f" ({why})" if why else "") + "; --show-superseded shows them")
    fail(f"no decisions recorded for plan {wanted}")


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
                as_of: str | None = None, moment: datetime | None = None) -> None:
    from rich.tree import Tree

    which = f"tree {as_of}" if as_of else ("full" if show_superseded else "current") + " tree"
    top = Tree(f"[bold]plan {plan_id}[/]  [dim]{which}, {total} decision(s)[/]")

    def label(d: Decision) -> str:
        if as_of is None or d.superseded_by is None:
            return node_label(d, plans, corrections, moment)
        # Current then: drawn as current, with what replaced it since.
        then = node_label(d.model_copy(update={"superseded_by": None}), plans, corrections,
                      moment)
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
app.command("export")(plan_list.export)
app.command("comment")(upkeep.comment)
app.command("complete")(upkeep.complete)
app.command("abandon")(upkeep.abandon)
app.command("use")(plan_use.use)
