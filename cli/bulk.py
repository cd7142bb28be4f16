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

from cli.bulk_show import batch_json, preview_json, show_batch, show_batches, show_preview
from cli.context import Ctx, parse_id, run
from cli.correct import _guidance, requester
from cli.errors import USAGE_ERROR, fail
from cli.plan_list import TIME_HELP, parse_time
from cli.render import JsonFlag, emit_json, out
from contracts.corrections.states import CorrectionMode
from contracts.decisions.plans import PlanStatus
from contracts.decisions.search import Currency
from contracts.decisions.types import DecisionType

if TYPE_CHECKING:
    from contracts.bulk.model import BulkBatch, BulkFilter
    from contracts.trust.policy import Identity
    from services.bulk import BulkService

app = typer.Typer(no_args_is_help=True, help="Correct every decision a filter matches, "
                  "as one batch: preview, request, show, list, cancel.")

Words = Annotated[str | None, typer.Argument(
    help="Words that must all appear in the question, chosen option or rationale.")]
TypeOpt = Annotated[DecisionType | None, typer.Option(
    "--type", case_sensitive=False, help="Only decisions of this type.")]
AgentOpt = Annotated[str | None, typer.Option(help="Only decisions this principal signed.")]
PathOpt = Annotated[str | None, typer.Option(help="Only decisions that produced this "
                                             "artifact, or one under this folder.")]
SinceOpt = Annotated[str | None, typer.Option(help="Created at or after. " + TIME_HELP)]
UntilOpt = Annotated[str | None, typer.Option(help="Created before. " + TIME_HELP)]
StatusOpt = Annotated[PlanStatus | None, typer.Option(
    case_sensitive=False, help="Only decisions of plans in this status.")]
StateOpt = Annotated[Currency, typer.Option(
    "--state", case_sensitive=False, help="current: still in their plan's tree; "
    "superseded: reverted.")]
ModeOpt = Annotated[CorrectionMode, typer.Option(
    "--mode", case_sensitive=False, help="revert: supersede each match's subtree; append: "
    "spawn a child plan under each.")]
GuidanceOpt = Annotated[str | None, typer.Option(
    help="Every correction's guidance (required for an append; a revert defaults to "
    "'Revert of decision ID requested by USER').")]
EXIT_CODES = {"completed": 0, "partially_failed": 3, "cancelled": 4}
WAIT_TIMEOUT = 300.0
POLL_SECONDS = 0.5


def _filter(text: str | None, *, decision_type: DecisionType | None, agent: str | None,
            path: str | None, since: str | None, until: str | None,
            plan_status: PlanStatus | None, state: Currency) -> BulkFilter:
    from pydantic import ValidationError

    from contracts.bulk.model import BulkFilter

    try:
        return BulkFilter(text=text, decision_type=decision_type, agent=agent, path=path,
                          since=parse_time(since, "--since"),
                          until=parse_time(until, "--until"), plan_status=plan_status,
                          state=state)
    except ValidationError as exc:
        fail(f"bad filter: {exc.errors()[0]['msg']}", USAGE_ERROR)


def _service(ctx: Ctx) -> BulkService:
    assert ctx.ledger.bulk is not None
    return ctx.ledger.bulk


def _identity(ctx: Ctx, batch_id: str) -> Identity:
    """The operator, as the workers will verify its requests; refused (exit 1) when the
    key is not an operator's."""
    from bootstrap.identity import bulk_identity
    from contracts.shared.rules import RuleViolation

    try:
        who = bulk_identity(ctx.settings, batch_id)
    except ValueError as exc:
        fail(str(exc))
    if isinstance(who, RuleViolation):
        fail(f"the bulk correction is refused: {who.rule.value}: {who.message}")
    return who


async def _resolve(ctx: Ctx, raw: str) -> str:
    """A whole batch ID, or the one recent batch whose ID ends with `raw`."""
    from contracts.shared.ids import is_ulid

    if is_ulid(raw):
        return raw
    found = [b.batch_id for b in await _service(ctx).recent(500)
             if b.batch_id.endswith(raw.upper())]
    if len(found) != 1:
        fail(f"{len(found) or 'no'} recent bulk batch(es) end with {raw}")
    return found[0]


@app.command()
def preview(text: Words = None, *, decision_type: TypeOpt = None, agent: AgentOpt = None,
            path: PathOpt = None, since: SinceOpt = None, until: UntilOpt = None,
            plan_status: StatusOpt = None, state: StateOpt = Currency.ANY,
            mode: ModeOpt = CorrectionMode.REVERT, guidance: GuidanceOpt = None,
            as_json: JsonFlag = False) -> None:
    """Dry run of the whole filter: matches, plans, blast radius, risk, files, conflicts."""
    where = _filter(text, decision_type=decision_type, agent=agent, path=path, since=since,
                    until=until, plan_status=plan_status, state=state)
    _guidance(guidance, mode, True)

    async def body(ctx: Ctx) -> None:
        from contracts.bulk.states import BulkError
        from contracts.shared.ids import new_id

        batch_id = new_id()
        try:
            matched = await _service(ctx).preview(where, mode, batch_id=batch_id,
                                                  identity=_identity(ctx, batch_id))
        except BulkError as exc:
            fail(str(exc))
        if as_json:
            emit_json(preview_json(matched.preview))
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
    where = _filter(text, decision_type=decision_type, agent=agent, path=path, since=since,
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
        service = _service(ctx)
        ops = await ctx.operator(requester())
        try:
            batch = await service.create(where, mode, text_guidance, reason, batch_id=bid,
                                         identity=_identity(ctx, bid),
                                         requested_by=requester())
            batch = await service.send(batch, ops)
        except BulkError as exc:
            fail(str(exc))
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
            found = await _service(ctx).refresh(await _resolve(ctx, raw))
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
        found = await _service(ctx).recent(limit)
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
            found, asked = await _service(ctx).cancel(await _resolve(ctx, raw), ops, reason)
        except BulkError as exc:
            fail(str(exc))
        if as_json:
            emit_json({**batch_json(found), "cancels_sent": asked})
        else:
            out.print(f"bulk batch {found.batch_id} cancelled; {asked} correction(s) asked "
                      "to cancel (applied ones stay applied)")

    run(body)
