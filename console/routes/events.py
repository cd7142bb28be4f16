"""The live stream: the ledger's events of one plan (or all) as server-sent events."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from console.deps import deps
from console.web import query_ulid


async def events(request: Request) -> Response:
    plan_id = query_ulid(request, "plan")
    return StreamingResponse(deps(request).hub.listen(plan_id),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
