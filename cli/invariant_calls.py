"""How the invariant commands call the invariant service (services.invariants), and
the options they share.

The service runs in this process against the ledger rather than over NATS, as
docs/invariants.md decides: invariants have no command subjects, the writes are rare,
and the operator wants the answer (the new ID, "unknown ID", "already resolved") at
once. A command that publishes (a resolve, a back-fill) connects to NATS first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from cli.context import Ctx
from cli.errors import fail

if TYPE_CHECKING:
    from services.invariants import InvariantService

T = TypeVar("T")

ProjectOpt = Annotated[str | None, typer.Option(help="A project name.")]
PlanOpt = Annotated[str | None, typer.Option(help="A plan ID (ULID).")]
ActionOpt = Annotated[str | None, typer.Option(help="An action template name.")]


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
