"""Dead letters: the list (with why a retry would fail, where it would), one letter (its
payload shown safely), a retry through the same service as `agents dead-letters retry`,
and a discard published over NATS as `agents dead-letters discard` publishes it; both
for one letter or every letter a filter (rule, plan) matches."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from clients.upkeep import UpkeepClient
from console.deps import deps
from console.web import Refused, body_of, dump, ok, query_int, query_ulid, text_field
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.dead_letter_care import REASON_MAX_CHARS
from contracts.shared.ids import is_ulid
from contracts.shared.rules import Rule
from services.dead_letters import BULK_MAX, Retried, RetryRefusal, RetryRefused

ID_MAX = 100
RETRY_REFUSED = {RetryRefusal.UNKNOWN: 404, RetryRefusal.KEPT_IN_PART: 409,
                 RetryRefusal.DUPLICATE: 409, RetryRefusal.NOT_STORED: 503,
                 RetryRefusal.DISCARDED: 409, RetryRefusal.REFUSED_AGAIN: 409,
                 RetryRefusal.STILL_BLOCKED: 409}


def _rule(raw: Any) -> str | None:
    if raw in (None, ""):
        return None
    try:
        return Rule(str(raw)).value
    except ValueError:
        raise Refused(400, f"rule {str(raw)[:40]!r} is not a rule's name") from None


async def dead_letters(request: Request) -> Response:
    d = deps(request)
    discarded = request.query_params.get("discarded") in ("1", "true")
    found = await d.reads.dead_letters.list(
        query_ulid(request, "plan"), query_int(request, "limit", 100, 1, 500),
        rule=_rule(request.query_params.get("rule")), discarded=discarded)
    return ok({"dead_letters": [await _brief(x, d.dead_letters.why_not) for x in found]})


async def _brief(x: DeadLetter, why_not: Any) -> dict[str, Any]:
    why = None if x.discarded_at else await why_not(x)
    return {"id": x.id, "subject": x.subject, "rejected_at": x.rejected_at.isoformat(),
            "plan_id": x.plan_id, "errors": [dump(e) for e in x.errors[:5]],
            "error_count": len(x.errors), "retryable": why is None and not x.discarded_at,
            "not_retryable": why,
            "discarded_at": x.discarded_at.isoformat() if x.discarded_at else None,
            "discarded_by": x.discarded_by, "discard_reason": x.discard_reason}


def _dead_letter_id(request: Request) -> str:
    value = str(request.path_params["dead_letter_id"])
    if len(value) > ID_MAX:
        raise Refused(400, "not a dead letter ID")
    return value


async def dead_letter(request: Request) -> Response:
    d = deps(request)
    found = await d.reads.dead_letters.get(_dead_letter_id(request))
    if found is None:
        raise Refused(404, "no such dead letter")
    data = dump(found, exclude={"payload"})
    brief = await _brief(found, d.dead_letters.why_not)
    return ok({**data, **found.payload_shown(), "retryable": brief["retryable"],
               "not_retryable": brief["not_retryable"]})


async def dead_letter_retry(request: Request) -> Response:
    """As `agents dead-letters retry` (the same service): republish as first sent,
    delete once stored; refused (409) when a retry cannot succeed, saying why."""
    await body_of(request)
    try:
        done = await deps(request).dead_letters.retry(_dead_letter_id(request))
    except RetryRefused as exc:
        raise Refused(RETRY_REFUSED[exc.refusal], str(exc)) from None
    return ok({"dead_letter_id": done.dead_letter_id, "stream": done.stream,
               "stream_sequence": done.stream_sequence, "deleted": True})


def _reason(body: dict[str, Any]) -> str:
    return text_field(body, "reason", max_chars=REASON_MAX_CHARS, required=True) or ""


async def dead_letter_discard(request: Request) -> Response:
    """As `agents dead-letters discard ID --reason R`: published; the workers record it."""
    d = deps(request)
    reason = _reason(await body_of(request))
    letter_id = _dead_letter_id(request)
    if await d.reads.dead_letters.get(letter_id) is None:
        raise Refused(404, "no such dead letter")
    await UpkeepClient(d.ops.connection, signer=d.ops.signer).discard(letter_id, reason)
    return ok({"dead_letter_id": letter_id, "status": "sent"}, 202)


def _matching(body: dict[str, Any]) -> tuple[str | None, str | None]:
    plan, rule = body.get("plan"), _rule(body.get("rule"))
    if plan is not None and not isinstance(plan, str):
        raise Refused(400, "plan must be a plan ID")
    if not (plan or rule):
        raise Refused(400, "give a rule or a plan: a bulk action needs a filter")
    if plan and not is_ulid(plan):
        raise Refused(400, "plan must be a plan ID")
    return (plan.upper() if plan else None), rule


async def bulk_retry(request: Request) -> Response:
    """Retry every kept letter a filter matches (what a retry can fix), as
    `agents dead-letters retry --rule R --plan P`: each one's outcome."""
    d = deps(request)
    plan, rule = _matching(await body_of(request))
    outcomes = await d.dead_letters.retry_matching(plan_id=plan, rule=rule, limit=BULK_MAX)
    return ok({"outcomes": [
        {"dead_letter_id": o.dead_letter_id, "retried": True, "stream_sequence":
         o.stream_sequence} if isinstance(o, Retried) else
        {"dead_letter_id": o.dead_letter_id, "retried": False, "message": str(o)}
        for o in outcomes]})


async def bulk_discard(request: Request) -> Response:
    """Discard every kept letter a filter matches, as `agents dead-letters discard
    --rule R --plan P --reason ...`."""
    d = deps(request)
    body = await body_of(request)
    reason = _reason(body)
    plan, rule = _matching(body)
    letters = await d.reads.dead_letters.list(plan, BULK_MAX, rule=rule)
    notes = UpkeepClient(d.ops.connection, signer=d.ops.signer)
    for letter in letters:
        await notes.discard(letter.id, reason)
    return ok({"discarded": [x.id for x in letters], "status": "sent"}, 202)
