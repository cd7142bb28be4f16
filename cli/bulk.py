"""`agents bulk`: correct every decision a search filter matches, as one batch.

`preview` is the dry run of the whole filter (nothing is written); `request` records the
batch and requests one ordinary correction per match, signed by the operator's key as
`agents plan correct` signs one (services/bulk.py); `show`, `list` and `cancel` follow
and stop it. The filter is `agents search`'s (docs/search.md); docs/bulk.md says more.
Exit codes of `request --wait`: 0 COMPLETED, 3 PARTIALLY_FAILED, 4 CANCELLED, 1 not
settled within --timeout (as `agents plan correct --wait`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated

import typer

from cli.bulk_options import (
    AgentOpt,
    GuidanceOpt,
    ModeOpt,
    PathOpt,
    SinceOpt,
    StateOpt,
    StatusOpt,
    TypeOpt,
    UntilOpt,
    Words,
    bulk_filter,
    bulk_service,
    operator_identity,
    resolve_batch,
)
from cli.bulk_show import batch_json, show_batch, show_batches, show_preview
from cli.context import Ctx, parse_id, run
from cli.correct import _guidance, requester
from cli.errors import USAGE_ERROR, err, fail
from cli.render import JsonFlag, dump, emit_json, out
from contracts.corrections.states import CorrectionMode
from contracts.decisions.currency import Currency

if TYPE_CHECKING:
    from contracts.bulk.model import BulkBatch
    from services.bulk import BulkService

app = typer.Typer(no_args_is_help=True, help="Correct every decision a filter matches, "
                  "as one batch: preview, request, show, list, cancel.")

EXIT_CODES = {"completed": 0, "partially_failed": 3, "cancelled": 4}
WAIT_TIMEOUT = 300.0
POLL_SECONDS = 0.5


@app.command()
def preview(text: Words = None, *, decision_type: TypeOpt = None, agent: AgentOpt = None,
            path: PathOpt = None, since: SinceOpt = None, until: UntilOpt = None,
            plan_status: StatusOpt = None, state: StateOpt = Currency.ANY,
            mode: ModeOpt = CorrectionMode.REVERT, guidance: GuidanceOpt = None,
            as_json: JsonFlag = False) -> None:
    """Dry run of the whole filter: matches, plans, blast radius, risk, files, conflicts."""
    where = bulk_filter(text, decision_type=decision_type, agent=agent, path=path, since=since,
                    until=until, plan_status=plan_status, state=state)
    _guidance(guidance, mode, True)

    async def body(ctx: Ctx) -> None:
        from contracts.bulk.states import BulkError
        from contracts.shared.ids import new_id

        batch_id = new_id()
        try:
            matched = await bulk_service(ctx).preview(where, mode, batch_id=batch_id,
                                                  identity=operator_identity(ctx, batch_id))
        except BulkError as exc:
            fail(str(exc))
        if as_json:
            emit_json(dump(matched.preview))
        else:
            show_preview(matched.preview)

    run(body)


@app.command()
def request(text: Words = None, *, decision_type: TypeOpt = None, agent: AgentOpt = None,
            path: PathOpt = None, since: SinceOpt = None, until: UntilOpt = None,
            plan_status: StatusOpt = None, state: StateOpt = Currency.ANY,
            mode: ModeOpt = CorrectionMode.REVERT, guidance: GuidanceOpt = None,
            reason: Annotated[str, typer.Option(
                help="Why (kept on the batch).")] = "",
            batch_id: Annotated[str | None, typer.Option(
                help="The batch's ULID (default: a new one). Requesting the same batch "
                "again re-sends only what it has not, and corrects nothing twice.")] = None,
            wait: Annotated[bool, typer.Option(
                "--wait", help="Follow the batch until every correction ended.")] = False,
            timeout: Annotated[float, typer.Option(min=0.1, help="Seconds --wait waits.")
                               ] = WAIT_TIMEOUT,
            as_json: JsonFlag = False) -> None:
    """Request one correction per match, as one batch; print its ID."""
    where = bulk_filter(text, decision_type=decision_type, agent=agent, path=path, since=since,
                    until=until, plan_status=plan_status, state=state)
    text_guidance = _guidance(guidance, mode, False)
    if not reason.strip():
        fail("--reason is required: say why (it is kept on the batch)", USAGE_ERROR)
    chosen = parse_id(batch_id, "--batch-id") if batch_id else None
    if chosen is not None and len(chosen) != 26:
        fail("--batch-id takes a whole ULID", USAGE_ERROR)

    async def body(ctx: Ctx) -> int:
        from contracts.bulk.states import BulkError
        from contracts.shared.ids import new_id

        bid = chosen or new_id()
        service = bulk_service(ctx)
        ops = await ctx.operator(requester())
        try:
            batch = await service.create(where, mode, text_guidance, reason, batch_id=bid,
                                         identity=operator_identity(ctx, bid),
                                         requested_by=requester())
        except BulkError as exc:
            fail(str(exc))
        try:
            batch = await service.send(batch, ops)
        except BaseException:
            # The error itself is said by `run`; this line says how to go on.
            err.print(f"bulk batch {bid} stopped sending; what was sent stands. Send the "
                      f"rest with the same command and --batch-id {bid}", soft_wrap=True)
            raise
        if not as_json:
            out.print(f"bulk batch {bid} requested: {len(batch.requested)} correction(s) "
                      f"of {len(batch.items)} match(es); follow it with: agents bulk show {bid}")
        if wait:
            batch = await _follow(service, bid, timeout, as_json)
        if as_json:
            emit_json(batch_json(batch))
        elif wait:
            show_batch(batch)
        return EXIT_CODES.get(batch.state.value, 1) if wait else 0

    code = run(body)
    if code:
        raise typer.Exit(code)


async def _follow(service: BulkService, batch_id: str, timeout: float, quiet: bool
                  ) -> BulkBatch:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        batch = await service.refresh(batch_id)
        line = ", ".join(f"{k} {v}" for k, v in batch.counts().items())
        if not quiet and line != last:
            out.print(f"  {batch.state.value}: {line}")
            last = line
        if batch.settled or time.monotonic() > deadline:
            return batch
        await asyncio.sleep(POLL_SECONDS)


@app.command()
def show(batch: Annotated[str, typer.Argument(help="The batch ID (or its last characters).")],
         as_json: JsonFlag = False) -> None:
    """A batch: its state, its items and their corrections' states, now."""
    raw = parse_id(batch, "batch")

    async def body(ctx: Ctx) -> None:
        from contracts.bulk.states import BulkError

        try:
            found = await bulk_service(ctx).refresh(await resolve_batch(ctx, raw))
        except BulkError as exc:
            fail(str(exc))
        if as_json:
            emit_json(batch_json(found))
        else:
            show_batch(found)

    run(body)


@app.command("list")
def list_batches(limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
                 as_json: JsonFlag = False) -> None:
    """Batches newest first, with their items' states."""
    async def body(ctx: Ctx) -> None:
        found = await bulk_service(ctx).recent(limit)
        if as_json:
            emit_json({"batches": [batch_json(b) for b in found]})
        else:
            show_batches(found)

    run(body)


@app.command()
def cancel(batch: Annotated[str, typer.Argument(help="The batch ID (or its last characters).")],
           reason: Annotated[str | None, typer.Option(help="Why (kept on each cancel).")
                             ] = None,
           as_json: JsonFlag = False) -> None:
    """Stop the batch: no more requests; corrections not yet executing are cancelled."""
    raw = parse_id(batch, "batch")

    async def body(ctx: Ctx) -> None:
        from contracts.bulk.states import BulkError

        ops = await ctx.operator(requester())
        try:
            wanted = await resolve_batch(ctx, raw)
            found, asked = await bulk_service(ctx).cancel(wanted, ops, reason)
        except BulkError as exc:
            fail(str(exc))
        if as_json:
            emit_json({**batch_json(found), "cancels_sent": asked})
        else:
            out.print(f"bulk batch {found.batch_id} cancelled; {asked} correction(s) asked "
                      "to cancel (applied ones stay applied)")

    run(body)
