"""`agents dead-letters list | show | retry | discard`: what the workers refused to
process, and what an operator does with it.

`retry` is services/dead_letters.py's (the console's Retry calls the same): the original
message republished as first sent, the dead letter deleted once JetStream stores it.
Only what a retry can fix is retried: a letter a rule refused for its own bytes (its
schema, its IDs, its size) would be refused again, so it is not republished and the
command says to discard it; one still blocked (its parent missing, its plan blocked)
says what to fix first; within the stream's duplicate window, when to try again.
`discard` is published over NATS and recorded by the workers (who, when, why): the
letter stays readable (`list --discarded`) and no longer counts in `agents status`.
Both take one ID, or a filter (`--rule`, `--plan`) for every letter it matches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli import dead_letter_actions
from cli.context import Ctx, parse_id, run
from cli.dead_letter_actions import LimitOpt, PlanOpt, RuleOpt, letter_plan
from cli.errors import fail
from cli.render import JsonFlag, clip, emit_json, out, table, when

if TYPE_CHECKING:
    from contracts.shared.dead_letter import DeadLetter

app = typer.Typer(help="Messages the workers rejected: retry what a retry can fix, "
                       "discard the rest.", no_args_is_help=True)



def _as_json(dl: DeadLetter) -> dict[str, Any]:
    out: dict[str, Any] = dl.model_dump(mode="json", exclude={"payload"})
    return out | dl.payload_shown()


async def _get(ctx: Ctx, dead_letter_id: str) -> DeadLetter:
    found = await ctx.reads.dead_letters.get(dead_letter_id)
    if found is None:
        fail(f"no dead letter {dead_letter_id} (agents dead-letters list shows them)")
    return found


@app.command("list")
def list_(
    plan: PlanOpt = None,
    rule: RuleOpt = None,
    discarded: Annotated[bool, typer.Option(
        "--discarded", help="The discarded ones instead (who, when, why).")] = False,
    limit: LimitOpt = 50,
    as_json: JsonFlag = False,
) -> None:
    """Dead letters, newest first."""
    plan = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        found = await ctx.reads.dead_letters.list(await letter_plan(ctx, plan), limit, rule=rule,
                                                  discarded=discarded)
        if as_json:
            emit_json([_as_json(d) for d in found])
            return
        if not found:
            out.print("no discarded dead letters" if discarded else "no dead letters")
            return
        rows = []
        for d in found:
            reason = d.errors[0].message if d.errors else "-"
            more = f" [dim](+{len(d.errors) - 1})[/]" if len(d.errors) > 1 else ""
            first = f"{d.errors[0].rule.value}: " if d.errors else ""
            row = [escape(d.id), escape(d.subject), when(d.rejected_at),
                   escape(first + clip(reason, 70)) + more]
            if discarded:
                row.append(f"{escape(d.discarded_by or '?')} {when(d.discarded_at)}: "
                           f"{escape(clip(d.discard_reason, 40))}")
            rows.append(row)
        table(["id", "subject", "rejected", "first reason",
               *(["discarded"] if discarded else [])], rows, ids_in={0})

    run(body)


@app.command("show")
def show(
    dead_letter_id: Annotated[str, typer.Argument(help="e.g. DECISIONS:17")],
    as_json: JsonFlag = False,
) -> None:
    """One dead letter: where it came from, every reason, and the payload."""

    async def body(ctx: Ctx) -> None:
        d = await _get(ctx, dead_letter_id)
        if as_json:
            emit_json(_as_json(d))
            return
        _print_letter(d)

    run(body)


def _print_letter(d: DeadLetter) -> None:
    out.print(f"[bold]dead letter {escape(d.id)}[/]")
    out.print(f"  subject: {escape(d.subject)}")
    out.print(f"  rejected: {when(d.rejected_at)} (delivered {d.delivered}x)")
    if d.discarded_at:
        out.print(f"  [yellow]discarded by {escape(d.discarded_by or '?')} at "
                  f"{when(d.discarded_at)}: {escape(d.discard_reason or '')}[/]")
    if d.plan_id:
        out.print(f"  plan: {d.plan_id}")
    if d.decision_id:
        out.print(f"  decision: {d.decision_id}")
    for k, v in d.headers.items():
        out.print(f"  header {escape(k)}: {escape(v)}")
    if d.truncated:
        out.print(f"  [yellow]{escape(d.kept_in_part())}[/]; it cannot be retried")
    out.print(f"  payload size: {d.payload_size} bytes, sha256 {d.payload_sha256}")
    out.print("  reasons:")
    for e in d.errors:
        field = f" ({e.field})" if e.field else ""
        out.print(f"    [red]{e.rule.value}[/]{escape(field)}: {escape(e.message)}")
    shown = d.payload_shown()
    if shown["payload_encoding"] == "utf-8":
        out.print(f"  payload (first {len(d.payload)} bytes):" if d.payload_truncated
                  else "  payload:")
        out.print(escape(shown["payload"]), markup=True, soft_wrap=True)
    else:
        out.print(f"  payload ({len(d.payload)} bytes kept, not UTF-8), hex:")
        out.print(d.payload.hex(" ", 2), soft_wrap=True)


app.command("retry")(dead_letter_actions.retry)
app.command("discard")(dead_letter_actions.discard)
