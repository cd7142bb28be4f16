"""`agents invariant add | list | remove | violations | resolve | reconcile`.

These call services.invariants in this process (cli.invariant_calls) rather than over
NATS, as docs/invariants.md decides: invariants have no command subjects, the writes are rare,
and the operator wants the answer (the new ID, "unknown ID", "already resolved") at
once. A resolve still announces itself: the service commits the resolution with its
event in the outbox and publishes it on `invariants.events.<plan_id>.resolved`, so this
command connects to NATS for it (and the workers' outbox relay covers a failed publish).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from cli import violations
from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.invariant_calls import (
    ActionOpt,
    CheckOpt,
    ConsequenceOpt,
    PlanOpt,
    ProjectOpt,
    SeverityOpt,
    call,
    checked_options,
)
from cli.render import JsonFlag, clip, dump, emit_json, out, table, when

if TYPE_CHECKING:
    from contracts.invariants.model import Invariant

app = typer.Typer(help="Constraints on plans, and their violations.", no_args_is_help=True)


def _one_scope(project: str | None, plan: str | None, action: str | None) -> tuple[str, str | None]:
    given = [(s, v) for s, v in (("PROJECT", project), ("PLAN", plan), ("ACTION", action))
             if v is not None]
    if len(given) > 1:
        fail("give at most one of --project, --plan and --action", USAGE_ERROR)
    if not given:
        return "GLOBAL", None
    scope, target = given[0]
    if scope == "PLAN":
        return scope, parse_id(target or "", "plan")
    if not (target or "").strip():
        fail(f"--{scope.lower()} is empty", USAGE_ERROR)
    return scope, target


def _gate(i: Invariant) -> str:
    """What the ledger does with it: `error/refuse check` is evaluated on every decision,
    `error/refuse` alone is reported by agents (or ruled on by a judge)."""
    return f"{i.severity.value}/{i.outcome.value}" + (" check" if i.check else "")


def _table(invariants: list[Invariant]) -> None:
    if not invariants:
        out.print("no invariants")
        return
    table(["id", "name", "scope", "target", "created", "gate", "description"],
          [[i.id, escape(i.name), i.scope.value, escape(i.scope_target or "-"),
            when(i.created_at), _gate(i), escape(clip(i.description, 60))]
           for i in invariants],
          ids_in={0})


async def plan_target(ctx: Ctx, raw: str) -> str:
    """The plan `--plan` names: refused when the ID is a decision's or a correction's
    (an invariant on it would bind no plan), or nothing is recorded under it."""
    from contracts.shared.views import IdKind
    from services.read_model import find

    wanted = await ctx.resolve(raw, IdKind.PLAN)
    found = await find(ctx.reads, wanted)
    if found.kind in ("decision", "correction"):
        fail(f"--plan {wanted} is a {found.kind} of plan {found.plan_id}, not a plan "
             f"(--plan {found.plan_id}?)")
    if found.kind == "none":
        fail(f"--plan {wanted}: no plan is recorded under that ID")
    return wanted


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Short name without spaces, e.g. no-prod-deletes.")],
    *,
    description: Annotated[str, typer.Option(help="The constraint, in natural language.")],
    project: ProjectOpt = None,
    plan: PlanOpt = None,
    action: ActionOpt = None,
    check: CheckOpt = None,
    severity: SeverityOpt = "error",
    consequence: ConsequenceOpt = None,
    needs_approval: Annotated[bool, typer.Option(
        "--needs-approval", help="A decision breaking it waits for a person's approval "
        "(agents approval) instead of being refused: --consequence hold.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Add an invariant: GLOBAL unless --project, --plan or --action names its scope.
    With --check the ledger evaluates it on every decision (docs/invariants.md)."""
    scope, target = _one_scope(project, plan, action)
    if needs_approval and consequence not in (None, "hold"):
        fail("--needs-approval is --consequence hold", USAGE_ERROR)
    checked = checked_options(check, severity, "hold" if needs_approval else consequence)

    async def body(ctx: Ctx) -> None:
        from contracts.invariants.model import InvariantScope

        bound = await plan_target(ctx, target or "") if scope == "PLAN" else target
        inv = await call(ctx, lambda s: s.add_invariant(
            name, description, InvariantScope(scope), bound, **checked))
        if as_json:
            emit_json(dump(inv))
        else:
            where = f" {escape(bound)}" if bound else ""
            out.print(f"invariant {inv.id} added: {escape(inv.name)} "
                      f"({inv.scope.value}{where})")

    run(body)


@app.command("list")
def list_(
    effective: Annotated[bool, typer.Option(
        "--effective", help="Only those in force, one per name, for --plan or --project "
        "(alone: what any new plan gets).")] = False,
    project: ProjectOpt = None,
    plan: PlanOpt = None,
    action: ActionOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Every invariant, or with --effective those in force for a plan or project."""
    if not effective and (project or plan or action):
        fail("--project, --plan and --action go with --effective", USAGE_ERROR)
    if plan and project:
        fail("give --plan or --project, not both (a recorded plan's own project counts)",
             USAGE_ERROR)
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        if effective:
            wanted = await plan_target(ctx, plan_id) if plan_id else None
            found = await call(ctx, lambda s: s.effective_for(wanted, project, action))
        else:
            found = await ctx.reads.invariants.find()
        if as_json:
            emit_json([dump(i) for i in found])
        else:
            _table(found)

    run(body)


@app.command("remove")
def remove(
    invariant_id: Annotated[str, typer.Argument(help="The invariant (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """Remove an invariant. Decisions already recorded under it and its violations stay."""
    invariant_id = parse_id(invariant_id, "invariant")

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(invariant_id, IdKind.INVARIANT)
        inv = await call(ctx, lambda s: s.remove_invariant(wanted))
        if as_json:
            emit_json(dump(inv))
        else:
            out.print(f"invariant {inv.id} removed: {escape(inv.name)}")

    run(body)


app.command("violations")(violations.violations)
app.command("resolve")(violations.resolve)
app.command("reconcile")(violations.reconcile)
