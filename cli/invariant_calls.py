"""How the invariant commands call the invariant service (services.invariants), and
the options they share.

The service runs in this process against the ledger rather than over NATS, as
docs/invariants.md decides: invariants have no command subjects, the writes are rare,
and the operator wants the answer (the new ID, "unknown ID", "already resolved") at
once. A command that publishes (a resolve, a back-fill) connects to NATS first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from cli.context import Ctx
from cli.errors import USAGE_ERROR, fail

if TYPE_CHECKING:
    from services.invariants import InvariantService

T = TypeVar("T")

ProjectOpt = Annotated[str | None, typer.Option(help="A project name.")]
PlanOpt = Annotated[str | None, typer.Option(help="A plan ID (ULID).")]
ActionOpt = Annotated[str | None, typer.Option(help="An action template name.")]
CheckOpt = Annotated[str | None, typer.Option(
    help="A CEL expression over the decision, true while it keeps the invariant, e.g. "
    "'!(tool.name == \"shell\" && tool.arguments.cmd.contains(\"rm -rf\"))' "
    "(docs/invariants.md, Checked invariants).")]
SeverityOpt = Annotated[str, typer.Option(
    help="error, warning or info: what breaking it is (and its default consequence).")]
ConsequenceOpt = Annotated[str | None, typer.Option(
    help="What a decision breaking it gets: refuse or hold (error), record (warning, "
    "info). Default: refuse for error, record otherwise.")]


def checked_options(check: str | None, severity: str, consequence: str | None
                    ) -> dict[str, Any]:
    """The check, severity and consequence as the service takes them; a bad expression
    or value is the operator's to fix: one line, exit 2, before anything connects."""
    from contracts.invariants.checks import InvalidCheck, compile_check
    from contracts.invariants.severity import CONSEQUENCES, Consequence, Severity

    try:
        sev = Severity(severity.lower())
        then = Consequence(consequence.lower()) if consequence else None
    except ValueError as exc:
        fail(f"{exc}: --severity is error, warning or info; --consequence refuse, hold or "
             "record", USAGE_ERROR)
    if then is not None and then not in CONSEQUENCES[sev]:
        allowed = " or ".join(sorted(c.value for c in CONSEQUENCES[sev]))
        fail(f"a {sev.value} invariant's --consequence is {allowed}", USAGE_ERROR)
    if check is not None:
        try:
            check = compile_check(check).source
        except InvalidCheck as exc:
            fail(f"--check: {exc}", USAGE_ERROR)
    return {"check": check, "severity": sev, "consequence": then}


async def call(ctx: Ctx, action: Callable[[InvariantService], Awaitable[T]],
               publishes: bool = False) -> T:
    """Run one service call; its named errors (unknown ID, duplicate name, invalid
    invariant, already resolved) are the operator's to fix, so they become one line."""
    from contracts.shared.errors import DomainError
    from contracts.shared.persistence import ResourceNotFoundError

    if publishes:
        await ctx.connected()
    try:
        return await action(ctx.ledger.invariants)
    except (DomainError, ResourceNotFoundError, ValueError) as exc:
        fail(str(exc).strip("'\""))
