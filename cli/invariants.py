"""`agents invariant add | list | remove | violations | resolve`.

These go through services.invariants directly against MongoDB rather than over NATS,
as docs/invariants.md decides: invariants have no command subjects, the writes are rare,
and the operator wants the answer (the new ID, "unknown ID", "already resolved") at
once. A resolve still announces itself: the service commits the resolution with its
event in the outbox and publishes it on `invariants.events.<plan_id>.resolved`, so this
command connects to NATS for it (and the workers' outbox relay covers a failed publish).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.correct import requester
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, console, dump, emit_json, short, when

if TYPE_CHECKING:
    from contracts.invariants.model import Invariant
    from contracts.invariants.violations import InvariantViolation
    from services.invariants import InvariantService

T = TypeVar("T")

app = typer.Typer(help="Constraints on plans, and their violations.", no_args_is_help=True)

ProjectOpt = Annotated[str | None, typer.Option(help="A project name.")]
PlanOpt = Annotated[str | None, typer.Option(help="A plan ID (ULID).")]
ActionOpt = Annotated[str | None, typer.Option(help="An action template name.")]


class _NoPublisher:
    """For commands that never publish; using it would be a bug in this module."""

    async def publish_all(self, events: Any) -> None:
        raise RuntimeError("this command does not publish")


async def _call(ctx: Ctx, action: Callable[[InvariantService], Awaitable[T]],
                publishes: bool = False) -> T:
    """Run one service call; its named errors (unknown ID, duplicate name, invalid
    invariant, already resolved) are the operator's to fix, so they become one line."""
    from contracts.shared.errors import DomainError  # noqa: PLC0415
    from services.invariants import InvariantService  # noqa: PLC0415
    from store.errors import ResourceNotFoundError  # noqa: PLC0415
    from store.invariant_store import InvariantStore  # noqa: PLC0415

    publisher = await ctx.publisher() if publishes else _NoPublisher()
    service = InvariantService.from_store(InvariantStore.open(ctx.db), publisher)
    try:
        return await action(service)
    except (DomainError, ResourceNotFoundError, ValueError) as exc:
        fail(str(exc).strip("'\""))


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


def _table(invariants: list[Invariant]) -> None:
    if not invariants:
        console.print("no invariants")
        return
    from rich.table import Table  # noqa: PLC0415

    table = Table("id", "name", "scope", "target", "created", "description")
    for i in invariants:
        table.add_row(i.id, escape(i.name), i.scope.value, escape(i.scope_target or "-"),
                      when(i.created_at), escape(clip(i.description, 60)))
    console.print(table)


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Short name without spaces, e.g. no-prod-deletes.")],
    *,
    description: Annotated[str, typer.Option(help="The constraint, in natural language.")],
    project: ProjectOpt = None,
    plan: PlanOpt = None,
    action: ActionOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Add an invariant: GLOBAL unless --project, --plan or --action names its scope."""
    scope, target = _one_scope(project, plan, action)

    async def body(ctx: Ctx) -> None:
        from contracts.invariants.model import InvariantScope  # noqa: PLC0415

        inv = await _call(ctx, lambda s: s.add_invariant(
            name, description, InvariantScope(scope), target))
        if as_json:
            emit_json(dump(inv))
        else:
            where = f" {escape(target)}" if target else ""
            console.print(f"invariant {inv.id} added: {escape(inv.name)} "
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
            found = await _call(ctx, lambda s: s.effective_for(plan_id, project, action))
        else:
            found = await _call(ctx, lambda s: s.list_invariants())
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
        inv = await _call(ctx, lambda s: s.remove_invariant(invariant_id))
        if as_json:
            emit_json(dump(inv))
        else:
            console.print(f"invariant {inv.id} removed: {escape(inv.name)}")

    run(body)


def _violation_row(v: InvariantViolation) -> list[str]:
    state = (f"resolved by {escape(v.resolved_by or '?')}" if v.is_resolved
             else "[red]blocking[/]" if v.blocks else "open")
    return [v.violation_id, short(v.invariant_id), short(v.plan_id), v.severity.value, state,
            when(v.reported_at), escape(clip(v.details, 50))]


@app.command("violations")
def violations(
    plan: PlanOpt = None,
    unresolved: Annotated[bool, typer.Option(
        "--unresolved", help="Only violations not resolved yet.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Reported violations, oldest first."""
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        found = await _call(ctx, lambda s: s.list_violations(plan_id, unresolved))
        if as_json:
            emit_json([dump(v) for v in found])
            return
        if not found:
            console.print("no violations")
            return
        from rich.table import Table  # noqa: PLC0415

        table = Table("violation", "invariant", "plan", "severity", "state", "reported",
                      "details")
        for v in found:
            table.add_row(*_violation_row(v))
        console.print(table)

    run(body)


@app.command("resolve")
def resolve(
    violation_id: Annotated[str, typer.Argument(help="The violation (ULID).")],
    by: Annotated[str | None, typer.Option(help="Who resolved it (default: $USER).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Resolve a violation; its plan is unblocked once no unresolved error remains."""
    violation_id = parse_id(violation_id, "violation")
    who = by if by is not None else requester()
    if not who.strip():
        fail("--by is empty", USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        done = await _call(ctx, lambda s: s.resolve_violation(violation_id, who),
                           publishes=True)
        if as_json:
            emit_json(dump(done))
        else:
            console.print(f"violation {done.violation_id} resolved by {escape(who)}")

    run(body)


def _backfilled_json(done: Any) -> dict[str, Any]:
    return {"plan_id": done.plan_id, "skipped": done.skipped,
            "published": [d.decision_id for d in done.published],
            "invariants": [(d.context_snapshot.hot_context_ref or "").removeprefix("invariant:")
                           for d in done.published]}


def _print_backfilled(done: Any) -> None:
    if done.skipped:
        console.print(f"plan {done.plan_id}: skipped, {escape(done.skipped)}")
    elif not done.published:
        console.print(f"plan {done.plan_id}: nothing to publish")
    else:
        console.print(f"plan {done.plan_id}: published {len(done.published)} "
                      "invariant_enforced decision(s)")
        for d in done.published:
            console.print(f"  {d.decision_id}  {escape(d.question)}")


@app.command("reconcile")
def reconcile(
    plan: PlanOpt = None,
    all_plans: Annotated[bool, typer.Option(
        "--all", help="Every plan with a root, a page at a time.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Back-fill: publish the invariant_enforced decisions a plan lacks (the invariants
    in force now), through the recorder like the reconciler's. Running it again
    publishes nothing new."""
    if (plan is None) == (not all_plans):
        fail("give --plan ID or --all", USAGE_ERROR)
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        async def go(s: InvariantService) -> list[Any]:
            if plan_id is not None:
                found = await s.backfill([plan_id])
                if not as_json:
                    for done in found:
                        _print_backfilled(done)
                return found
            out: list[Any] = []
            async for page in s.backfill_all():
                for done in page:
                    if not as_json and (done.published or done.skipped):
                        _print_backfilled(done)
                out += page
            return out

        found = await _call(ctx, go, publishes=True)
        total = sum(len(d.published) for d in found)
        if as_json:
            # --all lists only the plans it did something for (or skipped).
            shown = [d for d in found if plan_id or d.published or d.skipped]
            emit_json({"plans": [_backfilled_json(d) for d in shown],
                       "checked": len(found), "published": total})
        elif plan_id is None:
            console.print(f"{len(found)} plan(s) checked, {total} decision(s) published")

    run(body)
