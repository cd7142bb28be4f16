"""One decision: its panel, a correction's dry run and the decisions it would affect, and
the request of a correction (sent over NATS by the operator client, as the CLI does)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from clients.correction_errors import DryRunRefused, InvalidCorrection, LedgerUnavailable
from console.deps import Deps, deps
from console.shapes import brief, correction_brief
from console.web import Refused, body_of, dump, ok, text_field, ulid_param
from contracts.corrections.states import CorrectionMode
from contracts.decisions.guidance import GUIDANCE_MAX_CHARS
from contracts.decisions.model import Decision
from contracts.shared.ids import is_ulid
from services import read_model

DRY_RUN_TIMEOUT = 30.0
AFFECTED_ASK_MAX = 1000
"""Decision IDs one /affected request may ask about (a page asks per level drawn)."""


async def decision(request: Request) -> Response:
    decision_id = ulid_param(request, "decision_id")
    reads = deps(request).reads
    found = await read_model.explain(reads, decision_id)
    if found is None:
        raise Refused(404, f"no decision {decision_id} is recorded")
    return ok({
        "comments": [dump(c) for c in await reads.views.comments(decision_id)],
        "decision": {**dump(found.decision),
                     "phase": found.decision.decision_type.phase.value},
        "recorded_by": found.recorded_by,
        "path": [brief(p) for p in found.path],
        "children": [brief(c) for c in found.children],
        "downstream_decisions": [brief(x) for x in found.dependents],
        "child_plans": [{"plan_id": p, "status": found.child_plans[p].status.value
                         if p in found.child_plans else None}
                        for p in found.decision.downstream_plan_ids],
        "corrections": [correction_brief(c) for c in found.corrections]})


def _mode(body: dict[str, Any]) -> CorrectionMode:
    try:
        return CorrectionMode(str(body.get("mode", "")).lower())
    except ValueError:
        raise Refused(400, "mode is revert or append") from None


async def _target(d: Deps, decision_id: str) -> Decision:
    target = await d.reads.decisions.get(decision_id)
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
        d.affected.start(decision_id, d.reads.impact.walk)  # the page asks next
    return ok(dump(report))


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
    found = await d.affected.of(target, d.reads.impact.walk)
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
        raise Refused(409, await read_model.superseded_reason(d.reads, target))
    try:
        cid = await d.ops.request(target.plan_id, decision_id, mode, guidance,
                                  chosen_option=chosen, requested_by=d.operator_name)
    except InvalidCorrection as exc:
        raise Refused(400, str(exc)) from None
    return ok({"correction_id": cid, "plan_id": target.plan_id, "decision_id": decision_id,
               "mode": mode.value, "status": "requested"}, 202)
