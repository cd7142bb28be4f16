"""Corrections: the list, one correction with its attempts and what it changed, and the
operator's cancel, fail and retry (sent over NATS; the answer is the ledger's event)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

import nats.errors
from starlette.requests import Request
from starlette.responses import Response

from clients.command_answer import command_answer
from clients.correction_errors import InvalidCorrection
from clients.queued import Queued, queued_cancel, queued_requests
from console.deps import Deps, deps
from console.shapes import actions, correction_brief
from console.web import Refused, body_of, dump, ok, query_int, query_ulid, text_field, ulid_param
from contracts.corrections.states import CorrectionStatus
from services import read_model

ANSWER_TIMEOUT = 10.0
QUEUED_ANSWER_TIMEOUT = 2.0
"""A queued correction's cancel is answered only once a worker runs: wait briefly."""
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
        if found is None and verb == "cancel":
            return await _cancel_queued(d, correction_id, reason)
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


async def _cancel_queued(d: Deps, correction_id: str, reason: str | None) -> Response:
    """A request no worker has taken up: its cancel goes into the stream after it, and
    the worker that takes the request up cancels it before it runs."""
    queued = await queued_one(d, correction_id)
    if queued is None:
        raise Refused(404, f"no correction {correction_id} is recorded or queued")
    plan_id = queued.request.plan_id
    outcome = await command_answer(d.ops, correction_id, plan_id, verb="cancel",
                                   done=CorrectionStatus.CANCELLED,
                                   send=lambda: d.ops.cancel(correction_id, plan_id, reason),
                                   timeout=QUEUED_ANSWER_TIMEOUT)
    if outcome["status"] == "refused":
        raise Refused(409, str(outcome["message"]))
    if outcome["status"] is None:
        outcome = {"correction_id": correction_id, "status": "cancel_queued",
                   "message": "cancel queued: it will be cancelled before it runs"}
    return ok(outcome, 202 if outcome["status"] == "cancel_queued" else 200)


async def _in_stream(d: Deps, plan_id: str | None = None) -> list[Queued]:
    """What the stream holds past the request consumer's floor; none while NATS is not
    connected (the list then shows what MongoDB holds)."""
    nc = d.ops.connection
    if not nc.is_connected:
        return []
    try:
        return await queued_requests(nc, plan_id=plan_id)
    except (nats.errors.Error, OSError, TimeoutError):
        return []


async def queued_all(d: Deps, plan_id: str | None) -> list[Queued]:
    """Requests in the stream no worker has recorded yet, newest first."""
    found = await _in_stream(d, plan_id)
    if not found:
        return []
    recorded = {c.correction_id for c in await d.reads.corrections.find(
        plan_id, None, read_model.PLAN_CORRECTIONS_MAX)}
    return [q for q in reversed(found) if q.request.correction_id not in recorded]


async def queued_one(d: Deps, correction_id: str) -> Queued | None:
    return next((q for q in await _in_stream(d)
                 if q.request.correction_id == correction_id), None)


def queued_brief(q: Queued) -> dict[str, Any]:
    r = q.request
    return {"correction_id": r.correction_id, "plan_id": r.plan_id,
            "decision_id": r.decision_id, "mode": r.mode.value, "status": "queued",
            "requested_by": r.requested_by,
            "requested_at": q.stored_at.isoformat() if q.stored_at else None,
            "guidance": r.guidance[:300], "new_decision_id": None, "error": None,
            "actions": ["cancel"]}


async def corrections(request: Request) -> Response:
    """Newest first: the requests still queued in the stream, then those recorded."""
    d = deps(request)
    status_raw = request.query_params.get("status") or None
    try:
        status = CorrectionStatus(status_raw.lower()) if status_raw else None
    except ValueError:
        raise Refused(400, f"status {str(status_raw)[:20]!r} is not a correction status"
                      ) from None
    plan_id = query_ulid(request, "plan")
    limit = query_int(request, "limit", 200, 1, 500)
    queued = await queued_all(d, plan_id) if status is None else []
    found = await d.reads.views.recent_corrections(plan_id, status, limit)
    return ok({"corrections": [queued_brief(q) for q in queued[:limit]]
               + [correction_brief(c) for c in found[:max(0, limit - len(queued))]]})


async def correction(request: Request) -> Response:
    d = deps(request)
    reads = d.reads
    correction_id = ulid_param(request, "correction_id")
    found = await reads.corrections.get(correction_id)
    if found is None:
        queued = await queued_one(d, correction_id)
        if queued is None:
            raise Refused(404, f"no correction {correction_id} is recorded or queued")
        cancel = await queued_cancel(d.ops.connection, correction_id,
                                     queued.request.plan_id, queued.stream_sequence)
        return ok({"correction": {**queued_brief(queued), "history": [],
                                  "cancel_queued": cancel is not None},
                   "attempts": [], "diff": None, "queued": True})
    c = found.correction
    attempts = await reads.attempts.list_by_correction(correction_id)
    diff = await read_model.correction_diff_of(reads, correction_id)
    return ok({"correction": {**dump(c), "actions": actions(c.status)},
               "attempts": [dump(a) for a in attempts],
               "diff": dump(diff) if diff is not None else None})
