"""Approvals on the console: the queue of decisions awaiting a person, and a verdict
given from a decision on its tree.

A verdict is sent over NATS signed as the console's principal (clients.approval_verdicts,
as `agents approval approve|deny` sends it), naming the digest of the decision as
stored now; the workers judge who may decide and keep the outcome, which this waits
for a few seconds: 200 with it, 409 with the rule that refused it, 202 if no worker
answered yet. A denial with `append` then requests the append correction through the
operator client, with the ID the verdict named.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from clients.approval_verdicts import send_verdict
from console.deps import deps
from console.web import Refused, body_of, dump, ok, query_ulid, text_field, ulid_param
from contracts.corrections.states import CorrectionMode
from contracts.invariants.approval_wire import (
    ApprovalVerdict,
    Verdict,
    VerdictOutcome,
    VerdictStatus,
)
from contracts.invariants.approvals import MAX_GUIDANCE, MAX_REASON, ApprovalStatus
from contracts.shared.ids import new_id
from services.approvals import current_digest
from services.read_ports import ApprovalReads

ANSWER_WAIT = 15.0
POLL = 0.2


async def approvals(request: Request) -> Response:
    d = deps(request)
    every = request.query_params.get("status") == "all"
    found = await d.reads.approvals.find(None if every else ApprovalStatus.REQUESTED,
                                           query_ulid(request, "plan"), limit=500)
    briefs = await d.reads.decisions.get_many(a.decision_id for a in found)
    return ok({"approvals": [{**dump(a), "decision": _brief(briefs.get(a.decision_id))}
                             for a in found]})


def _brief(d: Any) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"decision_type": d.decision_type.value, "question": d.question,
            "chosen_option": d.chosen_option,
            "tool": d.tool.model_dump(mode="json") if d.tool else None}


async def approval(request: Request) -> Response:
    a = await deps(request).reads.approvals.get(ulid_param(request, "decision_id"))
    if a is None:
        raise Refused(404, "no approval was requested for this decision")
    return ok(dump(a))


async def decide(request: Request) -> Response:
    d = deps(request)
    decision_id = ulid_param(request, "decision_id")
    body = await body_of(request)
    try:
        what = Verdict(str(body.get("verdict", "")).lower())
    except ValueError:
        raise Refused(400, "verdict is grant or deny") from None
    reason = text_field(body, "reason", max_chars=MAX_REASON)
    guidance = text_field(body, "guidance", max_chars=MAX_GUIDANCE)
    append = body.get("append") is True
    if what is Verdict.GRANT and (guidance or append):
        raise Refused(400, "guidance and append go with a denial")
    if append and not guidance:
        raise Refused(400, "an append needs guidance: it becomes the child plan's prompt")
    a = await d.reads.approvals.get(decision_id)
    if a is None:
        raise Refused(404, f"no approval was requested for decision {decision_id}")
    v = ApprovalVerdict(plan_id=a.plan_id, decision_id=decision_id, verdict=what,
                        digest=await current_digest(d.reads.decisions, decision_id) or "missing",
                        reason=reason, guidance=guidance,
                        append_correction_id=new_id() if append else None)
    await send_verdict(d.ops.connection, v, signer=d.ops.signer)
    outcome = await _answer(d.reads.approvals, v.request_id)
    if outcome is None:
        return ok({"request_id": v.request_id, "status": "sent"}, 202)
    if outcome.status is VerdictStatus.REFUSED:
        rule = outcome.rule.value if outcome.rule else "refused"
        raise Refused(409, f"{rule}: {outcome.reason}")
    correction = None
    if v.append_correction_id and guidance:
        correction = await d.ops.request(a.plan_id, decision_id, CorrectionMode.APPEND,
                                         guidance, correction_id=v.append_correction_id)
    return ok({**dump(outcome), "correction_id": correction})


async def _answer(approvals: ApprovalReads, request_id: str) -> VerdictOutcome | None:
    for _ in range(int(ANSWER_WAIT / POLL)):
        found = await approvals.outcome(request_id)
        if found is not None:
            return found
        await asyncio.sleep(POLL)
    return None
