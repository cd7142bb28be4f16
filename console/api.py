"""The console's JSON API: reads from MongoDB through store.read_model, store.read_tree
and the store's repositories, writes through the operator client (the CLI's path, over
NATS), the invariant service or the dead-letter service (the CLI's calls), never straight
into MongoDB.

Every ID in a path is checked to be a ULID before anything is read; every list is
bounded; a refused command is a 4xx with `{"error": ...}` saying why, as the CLI's
one-line errors do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel
from pymongo.asynchronous.database import AsyncDatabase
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from clients.command_answer import command_answer
from clients.correction_errors import DryRunRefused, InvalidCorrection, LedgerUnavailable
from clients.operator import CorrectionClient
from console.affected import AffectedSets
from console.live import Hub
from contracts.corrections.as_of import SequenceCut
from contracts.corrections.record import Correction
from contracts.corrections.states import (
    CANCELLABLE,
    OPERATOR_FAILABLE,
    RETRYABLE,
    CorrectionMode,
    CorrectionStatus,
)
from contracts.decisions.guidance import GUIDANCE_MAX_CHARS
from contracts.decisions.model import Decision
from contracts.invariants.model import SCOPE_RANK
from contracts.shared.errors import DomainError
from contracts.shared.ids import is_ulid
from services.dead_letters import DeadLetterService, RetryRefusal, RetryRefused
from services.invariants import InvariantService
from services.ports.publishing import EventPublisher, MessagePublisher
from store import read_model, read_tree
from store.attempts import CorrectionAttemptRepository
from store.corrections import CorrectionRepository
from store.database import Document
from store.dead_letters import DeadLetterRepository
from store.decisions import DecisionRepository
from store.errors import ResourceNotFoundError
from store.impact import ImpactReader
from store.invariant_store import InvariantStore
from store.plans import PlanRepository
from store.views import TreeViews

DRY_RUN_TIMEOUT = 30.0
ANSWER_TIMEOUT = 10.0
PAGE_DEFAULT = 100
PAGE_MAX = 500
REASON_MAX = 1000


class Publisher(EventPublisher, MessagePublisher, Protocol):
    """The workers' JetStream publisher: events for the invariant service, one message
    as given for a dead letter's retry."""


class PublisherFactory(Protocol):
    def __call__(self) -> Publisher: ...


@dataclass
class Deps:
    """What the routes use; built by whoever runs the console (cli/console.py, tests)."""

    db: AsyncDatabase[Document]
    ops: CorrectionClient
    publisher: PublisherFactory
    hub: Hub
    operator_name: str = "operator"
    affected: AffectedSets = field(default_factory=AffectedSets)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


def deps(request: Request) -> Deps:
    found: Deps = request.app.state.deps
    return found


def ok(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status)


def dump(model: BaseModel, **kwargs: Any) -> Any:
    return model.model_dump(mode="json", **kwargs)


def ulid_param(request: Request, name: str) -> str:
    value = request.path_params[name]
    if not isinstance(value, str) or not is_ulid(value):
        raise Refused(400, f"{name} {str(value)[:40]!r} is not a ULID")
    return value.upper()


def query_ulid(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if not value:
        return None
    if not is_ulid(value):
        raise Refused(400, f"{name} {value[:40]!r} is not a ULID")
    return value.upper()


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Refused(400, f"{name} must be a whole number") from None
    return max(low, min(high, value))


async def body_of(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > 64 * 1024:
        raise Refused(413, "the request body is over 64 KiB")
    try:
        import json  # noqa: PLC0415

        data = json.loads(raw or b"{}")
    except ValueError:
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, "the body must be a JSON object")
    return data


def text_field(body: dict[str, Any], name: str, *, max_chars: int,
               required: bool = False) -> str | None:
    value = body.get(name)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise Refused(400, f"{name} is required")
        return None
    if not isinstance(value, str) or not value.strip():
        raise Refused(400, f"{name} must be non-blank text")
    if len(value) > max_chars:
        raise Refused(400, f"{name} is {len(value):,} characters; at most {max_chars:,}")
    return value


# --- serialising ----------------------------------------------------------------------

BRIEF_FIELDS = ("decision_id", "plan_id", "parent_decision_id", "sequence_number",
                "decision_type", "question", "chosen_option", "confidence_score",
                "superseded_by", "is_correction", "corrects_decision_id", "created_at",
                "downstream_plan_ids")


def brief(d: Decision) -> dict[str, Any]:
    data: dict[str, Any] = dump(d, include=set(BRIEF_FIELDS))
    data["phase"] = d.decision_type.phase.value
    return data


def correction_brief(c: Correction) -> dict[str, Any]:
    return {"correction_id": c.correction_id, "plan_id": c.plan_id,
            "decision_id": c.decision_id, "mode": c.mode.value, "status": c.status.value,
            "requested_by": c.requested_by, "requested_at": c.requested_at.isoformat(),
            "guidance": c.guidance[:300], "new_decision_id": c.new_decision_id,
            "error": c.error, "actions": actions(c.status)}


def actions(status: CorrectionStatus) -> list[str]:
    """What an operator may do now, from the lifecycle's own sets."""
    out = []
    if status in CANCELLABLE:
        out.append("cancel")
    if status in OPERATOR_FAILABLE:
        out.append("fail")
    if status in RETRYABLE:
        out.append("retry")
    return out


# --- plans, trees, decisions ----------------------------------------------------------


async def plans(request: Request) -> Response:
    d = deps(request)
    limit = query_int(request, "limit", 50, 1, 200)
    found = await read_model.recent_plans(d.db, limit, query_ulid(request, "before"))
    return ok({"plans": [{
        "plan_id": s.root.plan_id, "root": brief(s.root),
        "status": s.record.status.value if s.record else "active",
        "parent_plan_id": s.record.parent_plan_id if s.record else s.root.parent_plan_id,
        "project": s.root.project, "decisions": s.counts.decisions,
        "current": s.counts.current, "open_corrections": s.counts.open_corrections,
        "open_violations": s.counts.open_violations} for s in found]})


async def find(request: Request) -> Response:
    value = request.query_params.get("id", "").strip()
    found = await read_model.find(deps(request).db, value)
    if found.kind == "none":
        raise Refused(404, f"nothing is recorded with ID {value[:40]!r}")
    return ok({"kind": found.kind, "plan_id": found.plan_id, "decision_id": found.decision_id,
               "correction_id": found.correction_id})


async def plan(request: Request) -> Response:
    d = deps(request)
    plan_id = ulid_param(request, "plan_id")
    record = await PlanRepository(d.db).get(plan_id)
    counts = (await TreeViews(d.db).counts([plan_id]))[plan_id]
    if record is None and counts.decisions == 0:
        raise Refused(404, f"no plan {plan_id} is recorded")
    return ok({"plan_id": plan_id, "record": dump(record) if record else None,
               "decisions": counts.decisions, "current": counts.current,
               "open_corrections": counts.open_corrections,
               "open_violations": counts.open_violations})


async def tree(request: Request) -> Response:
    d = deps(request)
    plan_id = ulid_param(request, "plan_id")
    parent = query_ulid(request, "parent")
    after_raw = request.query_params.get("after")
    after = query_int(request, "after", 0, -1, 2**62) if after_raw else None
    level = await read_tree.tree_level(
        d.db, plan_id, parent, after=after,
        limit=query_int(request, "limit", PAGE_DEFAULT, 1, PAGE_MAX),
        superseded=request.query_params.get("superseded") in ("1", "true"))
    return ok({"plan_id": plan_id, "parent": parent, "next_after": level.next_after,
               "nodes": [{**brief(n.decision), "child_count": n.child_count,
                          "child_plans": [{"plan_id": p, "status": r.status.value}
                                          for p, r in n.child_plans.items()]
                          + [{"plan_id": p, "status": None}
                             for p in n.decision.downstream_plan_ids
                             if p not in n.child_plans],
                          "corrections": [correction_brief(c) for c in n.corrections]}
                         for n in level.nodes]})


AS_OF_MAX = 5000
"""Decisions sent at most for a tree as it was (the whole tree, read-only): beyond that
the page says how many were left out."""


async def as_of(request: Request) -> Response:
    """The plan's tree as of `at` (a correction of this plan, or an ISO time; `before=1`
    with a correction: the tree it was applied to), as `agents plan tree --as-of`."""
    from datetime import UTC, datetime  # noqa: PLC0415

    d = deps(request)
    plan_id = ulid_param(request, "plan_id")
    raw = request.query_params.get("at", "").strip()
    at: str | datetime
    if is_ulid(raw):
        at = raw.upper()
    else:
        try:
            moment = datetime.fromisoformat(raw)
        except ValueError:
            raise Refused(400, f"at {raw[:40]!r} is neither a correction ID nor an ISO time "
                               "(e.g. 2026-11-30T12:00:00Z)") from None
        at = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    try:
        then = await read_tree.tree_then(d.db, plan_id, at,
                                          before=request.query_params.get("before") == "1")
    except ValueError as exc:
        raise Refused(404, str(exc)) from None
    cut = then.cut
    return ok({"plan_id": plan_id,
               "cut": {"sequence_number": cut.sequence} if isinstance(cut, SequenceCut)
               else {"time": cut.at.isoformat()},
               "count": len(then.decisions),
               "decisions": [brief(x) for x in then.decisions[:AS_OF_MAX]],
               "corrections": [correction_brief(c) for c in then.corrections]})


async def decision(request: Request) -> Response:
    d = deps(request)
    decision_id = ulid_param(request, "decision_id")
    found = await read_model.explain(d.db, decision_id)
    if found is None:
        raise Refused(404, f"no decision {decision_id} is recorded")
    return ok({
        "decision": {**dump(found.decision),
                     "phase": found.decision.decision_type.phase.value},
        "path": [brief(p) for p in found.path],
        "children": [brief(c) for c in found.children],
        "downstream_decisions": [brief(x) for x in found.dependents],
        "child_plans": [{"plan_id": p, "status": found.child_plans[p].status.value
                         if p in found.child_plans else None}
                        for p in found.decision.downstream_plan_ids],
        "corrections": [correction_brief(c) for c in found.corrections]})


# --- corrections: dry run, request, cancel / fail / retry ------------------------------


def _mode(body: dict[str, Any]) -> CorrectionMode:
    try:
        return CorrectionMode(str(body.get("mode", "")).lower())
    except ValueError:
        raise Refused(400, "mode is revert or append") from None


async def _target(d: Deps, decision_id: str) -> Decision:
    target = await DecisionRepository(d.db).get(decision_id)
    if target is None:
        raise Refused(404, f"no decision {decision_id} is recorded")
    return target


async def dry_run(request: Request) -> Response:
    d = deps(request)
    decision_id = ulid_param(request, "decision_id")
    body = await body_of(request)
    mode = _mode(body)
    guidance = text_field(body, "guidance", max_chars=GUIDANCE_MAX_CHARS)
    if guidance is None and mode is CorrectionMode.APPEND:
        guidance = "(dry run: no guidance given)"
    chosen = text_field(body, "chosen_option", max_chars=GUIDANCE_MAX_CHARS)
    target = await _target(d, decision_id)
    try:
        report = await d.ops.dry_run(target.plan_id, decision_id, mode, guidance,
                                     chosen_option=chosen, timeout=DRY_RUN_TIMEOUT)
    except LedgerUnavailable:
        raise Refused(503, f"no dry-run answer within {DRY_RUN_TIMEOUT:g}s; are the "
                           "workers running?") from None
    except DryRunRefused as exc:
        raise Refused(409, f"dry run refused ({exc.code}): {exc.error.message}") from None
    except InvalidCorrection as exc:
        raise Refused(400, str(exc)) from None
    if report.impact.lists_truncated or report.impact.exceeds_limit:
        d.affected.start(decision_id, ImpactReader(d.db).walk)  # the page asks next
    return ok(dump(report))


AFFECTED_ASK_MAX = 1000
"""Decision IDs one /affected request may ask about (a page asks per level drawn)."""


async def affected(request: Request) -> Response:
    """Which of the decisions given (those the page draws) a correction of the target
    would affect: the dry-run reply lists only the first 100, the highlight needs all."""
    d = deps(request)
    target = ulid_param(request, "decision_id")
    body = await body_of(request)
    asked = body.get("ids")
    if not isinstance(asked, list) or len(asked) > AFFECTED_ASK_MAX \
            or not all(isinstance(i, str) and is_ulid(i) for i in asked):
        raise Refused(400, f"ids must be a list of at most {AFFECTED_ASK_MAX} decision IDs")
    found = await d.affected.of(target, ImpactReader(d.db).walk)
    if target not in found.ids:
        raise Refused(404, f"no decision {target} is recorded")
    return ok({"target_decision_id": target,
               "affected": [i for i in dict.fromkeys(x.upper() for x in asked)
                            if i in found.ids],
               "affected_count": len(found.ids), "complete": found.complete})


async def correct(request: Request) -> Response:
    d = deps(request)
    decision_id = ulid_param(request, "decision_id")
    body = await body_of(request)
    mode = _mode(body)
    guidance = text_field(body, "guidance", max_chars=GUIDANCE_MAX_CHARS,
                          required=mode is CorrectionMode.APPEND)
    chosen = text_field(body, "chosen_option", max_chars=GUIDANCE_MAX_CHARS)
    target = await _target(d, decision_id)
    if target.superseded_by is not None:
        raise Refused(409, f"decision {decision_id} is already superseded by "
                           f"{target.superseded_by}; correct that one instead")
    try:
        cid = await d.ops.request(target.plan_id, decision_id, mode, guidance,
                                  chosen_option=chosen, requested_by=d.operator_name)
    except InvalidCorrection as exc:
        raise Refused(400, str(exc)) from None
    return ok({"correction_id": cid, "plan_id": target.plan_id, "decision_id": decision_id,
               "mode": mode.value, "status": "requested"}, 202)


def _command(verb: str, allowed: frozenset[CorrectionStatus] | set[CorrectionStatus],
             done: CorrectionStatus, reason_required: bool = False
             ) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        d = deps(request)
        correction_id = ulid_param(request, "correction_id")
        body = await body_of(request)
        reason = text_field(body, "reason", max_chars=REASON_MAX, required=reason_required)
        found = await CorrectionRepository(d.db).get(correction_id)
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
        if outcome["status"] is None:
            return ok(outcome, 202)
        return ok(outcome)
    return handle


async def corrections(request: Request) -> Response:
    d = deps(request)
    status_raw = request.query_params.get("status") or None
    try:
        status = CorrectionStatus(status_raw.lower()) if status_raw else None
    except ValueError:
        raise Refused(400, f"status {str(status_raw)[:20]!r} is not a correction status"
                      ) from None
    found = await CorrectionRepository(d.db).find(
        query_ulid(request, "plan"), status, query_int(request, "limit", 200, 1, 1000))
    return ok({"corrections": [correction_brief(c) for c in reversed(found)]})


async def correction(request: Request) -> Response:
    d = deps(request)
    correction_id = ulid_param(request, "correction_id")
    found = await CorrectionRepository(d.db).get(correction_id)
    if found is None:
        raise Refused(404, f"no correction {correction_id} is recorded")
    c = found.correction
    attempts = await CorrectionAttemptRepository(d.db).list_by_correction(correction_id)
    diff = await read_model.correction_diff_of(d.db, correction_id)
    return ok({"correction": {**dump(c), "actions": actions(c.status)},
               "attempts": [dump(a) for a in attempts],
               "diff": dump(diff) if diff is not None else None})


# --- dead letters ---------------------------------------------------------------------


async def dead_letters(request: Request) -> Response:
    d = deps(request)
    found = await DeadLetterRepository(d.db).list(query_ulid(request, "plan"),
                                                  query_int(request, "limit", 100, 1, 500))
    return ok({"dead_letters": [{
        "id": x.id, "subject": x.subject, "rejected_at": x.rejected_at.isoformat(),
        "plan_id": x.plan_id, "errors": [dump(e) for e in x.errors[:5]],
        "error_count": len(x.errors), "retryable": not x.truncated} for x in found]})


def _dead_letter_id(request: Request) -> str:
    value = str(request.path_params["dead_letter_id"])
    if len(value) > 100:
        raise Refused(400, "not a dead letter ID")
    return value


async def dead_letter(request: Request) -> Response:
    d = deps(request)
    found = await DeadLetterRepository(d.db).get(_dead_letter_id(request))
    if found is None:
        raise Refused(404, "no such dead letter")
    data = dump(found, exclude={"payload"})
    return ok({**data, **found.payload_shown(),
               "retryable": not found.truncated})


RETRY_REFUSED = {RetryRefusal.UNKNOWN: 404, RetryRefusal.KEPT_IN_PART: 409,
                 RetryRefusal.DUPLICATE: 409, RetryRefusal.NOT_STORED: 503}


async def dead_letter_retry(request: Request) -> Response:
    """As `agents dead-letters retry` (the same service): republish as first sent,
    delete once stored."""
    d = deps(request)
    await body_of(request)
    service = DeadLetterService(DeadLetterRepository(d.db), d.publisher())
    try:
        done = await service.retry(_dead_letter_id(request))
    except RetryRefused as exc:
        raise Refused(RETRY_REFUSED[exc.refusal], str(exc)) from None
    return ok({"dead_letter_id": done.dead_letter_id, "stream": done.stream,
               "stream_sequence": done.stream_sequence, "deleted": True})


# --- invariants -----------------------------------------------------------------------


async def invariants(request: Request) -> Response:
    d = deps(request)
    plan_id = query_ulid(request, "plan")
    service = InvariantService.from_store(InvariantStore.open(d.db), d.publisher())
    every = await service.list_invariants()
    effective = await service.effective_for(plan_id) if plan_id else []
    in_force = {i.id for i in effective}
    return ok({
        "plan_id": plan_id,
        "precedence": [s.value for s in sorted(SCOPE_RANK, key=lambda s: -SCOPE_RANK[s])],
        "effective": [dump(i) for i in effective],
        "invariants": [{**dump(i), "in_force": i.id in in_force} for i in every]})


async def violations(request: Request) -> Response:
    d = deps(request)
    service = InvariantService.from_store(InvariantStore.open(d.db), d.publisher())
    found = await service.list_violations(
        query_ulid(request, "plan"), request.query_params.get("unresolved") in ("1", "true"))
    return ok({"violations": [{**dump(v), "blocks": v.blocks} for v in reversed(found)]})


async def resolve(request: Request) -> Response:
    """As `agents invariant resolve`: the service resolves and announces it."""
    d = deps(request)
    violation_id = ulid_param(request, "violation_id")
    await body_of(request)
    service = InvariantService.from_store(InvariantStore.open(d.db), d.publisher())
    try:
        done = await service.resolve_violation(violation_id, d.operator_name)
    except ResourceNotFoundError as exc:
        raise Refused(404, str(exc).strip("'\"")) from None
    except (DomainError, ValueError) as exc:
        raise Refused(409, str(exc).strip("'\"")) from None
    return ok(dump(done))


# --- live -----------------------------------------------------------------------------


async def events(request: Request) -> Response:
    plan_id = query_ulid(request, "plan")
    return StreamingResponse(deps(request).hub.listen(plan_id),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def routes() -> list[Route]:
    cs = CorrectionStatus
    return [
        Route("/api/plans", plans),
        Route("/api/find", find),
        Route("/api/plans/{plan_id}", plan),
        Route("/api/plans/{plan_id}/tree", tree),
        Route("/api/plans/{plan_id}/as-of", as_of),
        Route("/api/decisions/{decision_id}", decision),
        Route("/api/decisions/{decision_id}/dry-run", dry_run, methods=["POST"]),
        Route("/api/decisions/{decision_id}/affected", affected, methods=["POST"]),
        Route("/api/decisions/{decision_id}/corrections", correct, methods=["POST"]),
        Route("/api/corrections", corrections),
        Route("/api/corrections/{correction_id}", correction),
        Route("/api/corrections/{correction_id}/cancel",
              _command("cancel", CANCELLABLE, cs.CANCELLED), methods=["POST"]),
        Route("/api/corrections/{correction_id}/fail",
              _command("fail", OPERATOR_FAILABLE, cs.FAILED, reason_required=True),
              methods=["POST"]),
        Route("/api/corrections/{correction_id}/retry",
              _command("retry", RETRYABLE, cs.PENDING), methods=["POST"]),
        Route("/api/dead-letters", dead_letters),
        Route("/api/dead-letters/{dead_letter_id}", dead_letter),
        Route("/api/dead-letters/{dead_letter_id}/retry", dead_letter_retry, methods=["POST"]),
        Route("/api/invariants", invariants),
        Route("/api/violations", violations),
        Route("/api/violations/{violation_id}/resolve", resolve, methods=["POST"]),
        Route("/api/events", events),
    ]
