"""What an operator records beside a plan's tree from the console: a comment on a
decision, a plan marked completed or abandoned, and the plan as a JSON download.

Writes are published over NATS (clients.upkeep), as `agents plan comment | complete |
abandon` publish them; the workers record them with who sent them as they verified it.
The same rules the workers apply are judged first, so a refusal is a 409 at once; the
answer is 202: the record changes once a worker has applied it (the page reloads).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from clients.upkeep import UpkeepClient
from console.deps import Deps, deps
from console.web import Refused, body_of, ok, text_field, ulid_param
from contracts.decisions.comments import COMMENT_MAX_CHARS
from contracts.decisions.plan_ending import REASON_MAX_CHARS, PlanEndRefused, end_plan
from contracts.decisions.plan_states import PlanStatus
from contracts.shared.actor import UNVERIFIED
from contracts.shared.timestamps import utc_now
from services.plan_export import export_plan


def notes(d: Deps) -> UpkeepClient:
    return UpkeepClient(d.ops.connection, signer=d.ops.signer)


async def comment(request: Request) -> Response:
    d = deps(request)
    decision_id = ulid_param(request, "decision_id")
    body = await body_of(request)
    text = text_field(body, "text", max_chars=COMMENT_MAX_CHARS, required=True) or ""
    target = await d.reads.decisions.get(decision_id)
    if target is None:
        raise Refused(404, f"no decision {decision_id} is recorded")
    cid = await notes(d).comment(target.plan_id, decision_id, text)
    return ok({"comment_id": cid, "decision_id": decision_id, "status": "sent"}, 202)


def ending(status: str) -> Any:
    async def handle(request: Request) -> Response:
        d = deps(request)
        plan_id = ulid_param(request, "plan_id")
        body = await body_of(request)
        reason = text_field(body, "reason", max_chars=REASON_MAX_CHARS)
        record = await d.reads.plans.get(plan_id)
        counts = (await d.reads.views.counts([plan_id]))[plan_id]
        try:
            end_plan(plan_id, record, recorded=counts.decisions > 0, to=PlanStatus(status),
                     actor=UNVERIFIED, owner=None, open_corrections=counts.open_corrections,
                     at=utc_now(), reason=reason)
        except PlanEndRefused as exc:
            raise Refused(409, str(exc)) from None
        await notes(d).end_plan(plan_id, status, reason)
        return ok({"plan_id": plan_id, "status": status, "sent": True}, 202)
    return handle


async def export(request: Request) -> Response:
    plan_id = ulid_param(request, "plan_id")
    found = await export_plan(deps(request).reads, plan_id)
    if found is None:
        raise Refused(404, f"no plan {plan_id} is recorded")
    return Response(json.dumps(found.as_json(), indent=2, ensure_ascii=False),
                    media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="plan-{plan_id}.json"'})
