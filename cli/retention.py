"""`agents retention show | run`: the retention policies in force, and one pass of them
(docs/retention.md, Retention).

`show` lists the policies (RETENTION_POLICIES) and what a pass would do now; `run
--dry-run` says the same, and `run` does it: the same bounded pass the workers run every
RETENTION_INTERVAL_SECONDS, for an operator who does not want to wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from cli.context import Ctx, run
from cli.render import JsonFlag, emit_json, out

if TYPE_CHECKING:
    from services.retention import Outcome

app = typer.Typer(help="Retention: policies by plan status and age, applied in bounded "
                  "batches.", no_args_is_help=True)


def _pass(*, dry_run: bool) -> list[Outcome]:
    async def body(ctx: Ctx) -> list[Outcome]:
        from bootstrap.retention import retention_service
        from contracts.shared.timestamps import utc_now

        svc = retention_service(ctx.settings.retention, ctx.ledger.store,
                                ctx.settings.resolved_archive_root())
        return await svc.run(utc_now(), dry_run=dry_run)

    return run(body)


def _print(outcomes: list[Outcome], *, dry_run: bool) -> None:
    if not outcomes:
        out.print("no retention policy (RETENTION_POLICIES is unset): nothing expires")
        return
    verb = "would apply to" if dry_run else "applied to"
    for o in outcomes:
        held = f", {o.held} held (their family is not all due, or nowhere to export)" \
            if o.held else ""
        out.print(f"{escape(o.policy.name)}: {escape(o.policy.describe())}\n"
                  f"  due {o.due}, {verb} {o.done}{held}")
        for path in o.exported[:10]:
            out.print(f"  exported {escape(path)}")


def show(as_json: JsonFlag = False) -> None:
    """The policies in force and what a pass would do now (nothing is changed)."""
    outcomes = _pass(dry_run=True)
    if as_json:
        emit_json({"policies": [o.as_json() for o in outcomes], "dry_run": True})
        return
    _print(outcomes, dry_run=True)


def run_pass(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what it would do.")
                       ] = False,
    as_json: JsonFlag = False,
) -> None:
    """One pass of every policy, in bounded batches (what the workers run)."""
    outcomes = _pass(dry_run=dry_run)
    if as_json:
        emit_json({"policies": [o.as_json() for o in outcomes], "dry_run": dry_run})
        return
    _print(outcomes, dry_run=dry_run)


app.command("show")(show)
app.command("run")(run_pass)
