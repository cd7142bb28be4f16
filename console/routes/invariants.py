"""Invariants (every one, and those in force for a plan) and violations, and resolving a
violation through the same service as `agents invariant resolve`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from console.deps import deps
from console.web import Refused, body_of, dump, ok, query_ulid, ulid_param
from contracts.invariants.model import SCOPE_RANK
from contracts.shared.errors import DomainError
from contracts.shared.persistence import ResourceNotFoundError
from contracts.shared.rules import RuleViolation


async def invariants(request: Request) -> Response:
    d = deps(request)
    plan_id = query_ulid(request, "plan")
    every = await d.reads.invariants.find()
    effective = await d.invariants.effective_for(plan_id) if plan_id else []
    in_force = {i.id for i in effective}
    return ok({
        "plan_id": plan_id,
        "precedence": [s.value for s in sorted(SCOPE_RANK, key=lambda s: -SCOPE_RANK[s])],
        "effective": [dump(i) for i in effective],
        "invariants": [{**dump(i), "in_force": i.id in in_force} for i in every]})


async def violations(request: Request) -> Response:
    reads = deps(request).reads
    found = await reads.violations.find(
        query_ulid(request, "plan"),
        unresolved_only=request.query_params.get("unresolved") in ("1", "true"))
    names = {i.id: i.name for i in await reads.invariants.find()}
    return ok({"violations": [{**dump(v), "blocks": v.blocks,
                               "invariant_name": names.get(v.invariant_id)}
                              for v in reversed(found)]})


async def resolve(request: Request) -> Response:
    """As `agents invariant resolve`: signed as the console's principal, then the service
    resolves and announces it."""
    d = deps(request)
    violation_id = ulid_param(request, "violation_id")
    await body_of(request)
    try:
        held = await d.invariants.get_violation(violation_id)
        who = d.resolution_identity(held.violation_id, held.plan_id)
        if isinstance(who, RuleViolation):
            raise Refused(403, f"the resolution is refused: {who}")
        done = await d.invariants.resolve_violation(violation_id, who)
    except ResourceNotFoundError as exc:
        raise Refused(404, str(exc).strip("'\"")) from None
    except (DomainError, ValueError) as exc:
        raise Refused(409, str(exc).strip("'\"")) from None
    return ok(dump(done))
