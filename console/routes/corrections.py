"""Corrections: the list, one correction with its attempts and what it changed, and the
operator's cancel, fail and retry (sent over NATS; the answer is the ledger's event)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

from starlette.requests import Request
from starlette.responses import Response

from clients.command_answer import command_answer
from clients.correction_errors import InvalidCorrection
from console.deps import deps
from console.shapes import actions, correction_brief
from console.web import Refused, body_of, dump, ok, query_int, query_ulid, text_field, ulid_param
from contracts.corrections.states import CorrectionStatus
from services import read_model

ANSWER_TIMEOUT = 10.0
REASON_MAX = 1000

Handler = Callable[[Request], Awaitable[Response]]


def command(verb: str, allowed: Collection[CorrectionStatus], done: CorrectionStatus,
            reason_required: bool = False) -> Handler:
    """The route of one operator command: refused at once (409) when the correction's
    status does not allow it, else sent and answered with the ledger's outcome (202
    while no answer came within ANSWER_TIMEOUT)."""
    async def handle(request: Request) -> Response:
        d = deps(request)
        correction_id = ulid_param(request, "correction_id")
        body = await body_of(request)
        reason = text_field(body, "reason", max_chars=REASON_MAX, required=reason_required)
        found = await d.reads.corrections.get(correction_id)
        if found is None:
            raise Refused(404, f"no correction {correction_id} is recorded")
        c = found.correction
        if c.status not in allowed:
            raise Refused(409, f"{verb} refused: the correction is {c.status.value}")
        send: dict[str, Callable[[], Awaitable[object]]] = {
            "cancel": lambda: d.ops.cancel(c.correction_id, c.plan_id, reason),
            "fail": lambda: d.ops.fail(c.correction_id, c.plan_id, reason or ""),
            "retry": lambda: d.ops.retry(c.correction_id, c.plan_id, reason,
                                         requested_by=d.operator_name)}
        try:
            outcome = await command_answer(d.ops, c.correction_id, c.plan_id, verb=verb,
                                           done=done, send=send[verb],
                                           timeout=ANSWER_TIMEOUT)
        except InvalidCorrection as exc:
            raise Refused(400, str(exc)) from None
        if outcome["status"] == "refused":
            raise Refused(409, str(outcome["message"]))
        return ok(outcome, 202 if outcome["status"] is None else 200)
    return handle


async def corrections(request: Request) -> Response:
    status_raw = request.query_params.get("status") or None
    try:
        status = CorrectionStatus(status_raw.lower()) if status_raw else None
    except ValueError:
        raise Refused(400, f"status {str(status_raw)[:20]!r} is not a correction status"
                      ) from None
    found = await deps(request).reads.corrections.find(
        query_ulid(request, "plan"), status, query_int(request, "limit", 200, 1, 1000))
    return ok({"corrections": [correction_brief(c) for c in reversed(found)]})


async def correction(request: Request) -> Response:
    reads = deps(request).reads
    correction_id = ulid_param(request, "correction_id")
    found = await reads.corrections.get(correction_id)
    if found is None:
        raise Refused(404, f"no correction {correction_id} is recorded")
    c = found.correction
    attempts = await reads.attempts.list_by_correction(correction_id)
    diff = await read_model.correction_diff_of(reads, correction_id)
    return ok({"correction": {**dump(c), "actions": actions(c.status)},
               "attempts": [dump(a) for a in attempts],
               "diff": dump(diff) if diff is not None else None})
