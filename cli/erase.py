"""`agents erase`: remove the free text of a decision, a plan, or every decision that
mentions a reference, keeping the tree (docs/retention.md, Erasure).

Like `agents invariant resolve`, the command writes MongoDB itself: it signs the erasure
with NATS_NKEY_SEED and verifies that signature against LEDGER_PRINCIPALS exactly as a
worker would (role operator, within the plans' projects), so the erasure's record names
who did it; unsigned it is refused under REQUIRE_SIGNATURES (ADR 0034).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, emit_json, out

if TYPE_CHECKING:
    from services.erasure import Erased, Scope

ERASURE_KIND = "ledger.erasure"
"""The kind an erasure is signed as (contracts.trust.signing's domain separation): no
message family carries it, so its signature cannot be replayed as one."""


def _scope(decision: str | None, plan: str | None, mentions: str | None) -> Scope:
    from services.erasure import Scope

    given = [x for x in (decision, plan, mentions) if x]
    if len(given) != 1:
        fail("name exactly one of: a decision ID, --plan ID, --mentions REF", USAGE_ERROR)
    if mentions:
        return Scope(mentions=mentions)
    if plan:
        return Scope(plan_id=parse_id(plan, "plan"))
    return Scope(decision_id=parse_id(str(decision), "decision"))


def _identity(ctx: Ctx, erasure_id: str, scope: Scope, reason: str) -> Any:
    from bootstrap.identity import own_identity
    from contracts.shared.roles import Role
    from contracts.shared.rules import RuleViolation
    from services.erasure import erasure_body

    try:
        who = own_identity(ctx.settings, kind=ERASURE_KIND,
                           subject=f"{ERASURE_KIND}.{erasure_id}", msg_id=erasure_id,
                           body=erasure_body(erasure_id, scope, reason),
                           roles={Role.OPERATOR})
    except ValueError as exc:
        fail(str(exc))
    if isinstance(who, RuleViolation):
        fail(f"the erasure is refused: {who}")
    return who


def erase(
    decision: Annotated[str | None, typer.Argument(help="The decision (ULID).")] = None,
    *,
    plan: Annotated[str | None, typer.Option("--plan", help="Every decision of this plan.")
                    ] = None,
    mentions: Annotated[str | None, typer.Option(
        "--mentions", help="Every decision whose text or references contain REF.")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept on the erasure's "
                                        "record).")] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what it reaches.")
                       ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Erase free text, keeping IDs, links, sequence numbers, times and digests: the
    tree, its history and `agents audit verify` keep working and show "(erased)"."""
    if not reason.strip():
        fail("--reason is required: say why (it is kept on the erasure's record)",
             USAGE_ERROR)
    scope = _scope(decision, plan, mentions)

    async def body(ctx: Ctx) -> Erased:
        from contracts.retention.reach import TooMany
        from contracts.shared.ids import new_id
        from contracts.shared.timestamps import utc_now
        from contracts.shared.views import IdKind
        from services.erasure import ErasureService, Refused, Scope

        s = scope
        if s.decision_id:
            s = Scope(decision_id=await ctx.resolve(s.decision_id, IdKind.DECISION))
        elif s.plan_id:
            s = Scope(plan_id=await ctx.resolve(s.plan_id, IdKind.PLAN))
        erasure_id = new_id()
        who = _identity(ctx, erasure_id, s, reason)
        svc = ErasureService(ctx.ledger.store.erasures, ctx.settings.resolved_archive_root())
        try:
            return await svc.erase(s, reason, who, utc_now(), erasure_id=erasure_id,
                                   dry_run=dry_run)
        except (Refused, TooMany) as exc:
            fail(str(exc))

    done = run(body)
    if as_json:
        emit_json(_json(done))
        return
    verb = "would erase" if done.dry_run else "erased"
    r = done.reach
    out.print(f"erasure {done.erasure_id}: {verb} {len(r.decision_ids)} decision(s) in "
              f"{len(r.plan_ids)} plan(s), {len(r.correction_ids)} correction(s)"
              + ("" if done.dry_run else f"; {done.files_removed} archived file(s) removed"))
    for plan_id in r.plan_ids[:20]:
        out.print(f"  plan {escape(plan_id)}")
    if done.archives_missing:
        out.print(f"warning: {done.archives_missing} correction archive(s) not found under "
                  "ARCHIVE_ROOT here: run it where the workers' archive is, or remove their "
                  "copies there (the text in MongoDB is erased)")


def _json(done: Erased) -> dict[str, Any]:
    r = done.reach
    return {"erasure_id": done.erasure_id, "dry_run": done.dry_run,
            "decision_ids": r.decision_ids, "plan_ids": r.plan_ids,
            "correction_ids": r.correction_ids, "records_erased": done.records,
            "files_removed": done.files_removed, "archives_missing": done.archives_missing}
