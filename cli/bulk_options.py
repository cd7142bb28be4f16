"""The filter options `agents bulk` shares with `agents search`, and what its commands
need from the ledger: the bulk service, the operator's verified identity, a batch ID
typed as its last characters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from cli.context import Ctx
from cli.errors import USAGE_ERROR, fail
from cli.plan_list import TIME_HELP, parse_time
from contracts.corrections.states import CorrectionMode
from contracts.decisions.currency import Currency
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.types import DecisionType

if TYPE_CHECKING:
    from contracts.bulk.model import BulkFilter
    from contracts.trust.policy import Identity
    from services.bulk import BulkService

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


def bulk_filter(text: str | None, *, decision_type: DecisionType | None,
                agent: str | None, path: str | None, since: str | None, until: str | None,
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


def bulk_service(ctx: Ctx) -> BulkService:
    assert ctx.ledger.bulk is not None
    return ctx.ledger.bulk


def operator_identity(ctx: Ctx, batch_id: str) -> Identity:
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


async def resolve_batch(ctx: Ctx, raw: str) -> str:
    """A whole batch ID, or the one recent batch whose ID ends with `raw`."""
    from contracts.shared.ids import is_ulid

    if is_ulid(raw):
        return raw
    found = [b.batch_id for b in await bulk_service(ctx).recent(500)
             if b.batch_id.endswith(raw.upper())]
    if len(found) != 1:
        fail(f"{len(found) or 'no'} recent bulk batch(es) end with {raw}")
    return found[0]
