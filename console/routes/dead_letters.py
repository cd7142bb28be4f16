"""Dead letters: the list, one letter (its payload shown safely), and a retry through the
same service as `agents dead-letters retry`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from console.deps import deps
from console.web import Refused, body_of, dump, ok, query_int, query_ulid
from services.dead_letters import RetryRefusal, RetryRefused

ID_MAX = 100
RETRY_REFUSED = {RetryRefusal.UNKNOWN: 404, RetryRefusal.KEPT_IN_PART: 409,
                 RetryRefusal.DUPLICATE: 409, RetryRefusal.NOT_STORED: 503}


async def dead_letters(request: Request) -> Response:
    found = await deps(request).reads.dead_letters.list(
        query_ulid(request, "plan"), query_int(request, "limit", 100, 1, 500))
    return ok({"dead_letters": [{
        "id": x.id, "subject": x.subject, "rejected_at": x.rejected_at.isoformat(),
        "plan_id": x.plan_id, "errors": [dump(e) for e in x.errors[:5]],
        "error_count": len(x.errors), "retryable": not x.truncated} for x in found]})


def _dead_letter_id(request: Request) -> str:
    value = str(request.path_params["dead_letter_id"])
    if len(value) > ID_MAX:
        raise Refused(400, "not a dead letter ID")
    return value


async def dead_letter(request: Request) -> Response:
    found = await deps(request).reads.dead_letters.get(_dead_letter_id(request))
    if found is None:
        raise Refused(404, "no such dead letter")
    data = dump(found, exclude={"payload"})
    return ok({**data, **found.payload_shown(), "retryable": not found.truncated})


async def dead_letter_retry(request: Request) -> Response:
    """As `agents dead-letters retry` (the same service): republish as first sent,
    delete once stored."""
    await body_of(request)
    try:
        done = await deps(request).dead_letters.retry(_dead_letter_id(request))
    except RetryRefused as exc:
        raise Refused(RETRY_REFUSED[exc.refusal], str(exc)) from None
    return ok({"dead_letter_id": done.dead_letter_id, "stream": done.stream,
               "stream_sequence": done.stream_sequence, "deleted": True})
