"""Webhooks in the console: the list, the deliveries, adding one (its secret in the answer,
once) and removing one, through the same service as `agents webhook`; and the event
schemas every event's `ce-dataschema` names (docs/schemas/), served as files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from console.deps import deps
from console.web import Refused, body_of, dump, ok, query_int, query_ulid, ulid_param
from contracts.families import FAMILIES
from contracts.shared.cloudevents import schema_file
from contracts.webhooks.model import DeliveryStatus
from contracts.webhooks.policy import RefusedUrl
from services.webhooks import WebhookNotFound, WebhookService

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
SCHEMA_FILES = {schema_file(f) for f in FAMILIES}
"""The only names served: one per declared family, never a path from the request."""


def _service(request: Request) -> WebhookService:
    found = deps(request).webhooks
    if found is None:
        raise Refused(503, "webhooks are not wired in this console")
    return found


async def webhooks(request: Request) -> Response:
    found = await _service(request).listed()
    return ok({"webhooks": [dump(w) for w in found],
               "sealed": _service(request).sealer.sealing})


async def deliveries(request: Request) -> Response:
    raw = request.query_params.get("status")
    try:
        status = DeliveryStatus(raw) if raw else None
    except ValueError:
        raise Refused(400, "status: pending, delivered or dead_lettered") from None
    found = await _service(request).deliveries(query_ulid(request, "webhook"), status,
                                               query_int(request, "limit", 100, 1, 500))
    return ok({"deliveries": [dump(d) for d in found]})


def _events(body: dict[str, Any]) -> list[str]:
    events = body.get("events")
    if isinstance(events, str):
        events = [e.strip() for e in events.split(",") if e.strip()]
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise Refused(400, "events: a list of event types")
    return events


async def add(request: Request) -> Response:
    """As `agents webhook add`: the answer carries the secret, this once."""
    body = await body_of(request)
    url = body.get("url")
    if not isinstance(url, str):
        raise Refused(400, "url is required")
    description = body.get("description")
    try:
        w, secret = await _service(request).add(
            url, _events(body), by=deps(request).operator_name,
            description=description if isinstance(description, str) else None)
    except (RefusedUrl, ValueError) as exc:
        raise Refused(400, str(exc)) from None
    return ok({**dump(w), "secret": secret}, 201)


async def remove(request: Request) -> Response:
    await body_of(request)
    try:
        w = await _service(request).remove(ulid_param(request, "webhook_id"),
                                           by=deps(request).operator_name)
    except WebhookNotFound:
        raise Refused(404, "no such active webhook") from None
    return ok(dump(w))


async def schema(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in SCHEMA_FILES or not (SCHEMAS / name).is_file():
        raise Refused(404, "no such schema")
    return FileResponse(SCHEMAS / name, media_type="application/schema+json")
