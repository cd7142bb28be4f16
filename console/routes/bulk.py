"""Bulk corrections: the filter's dry run, the batch requested, its progress, its cancel
(services/bulk.py, as `agents bulk` does).

A request records the batch and answers at once (202); its corrections are sent by a
task of the console's, each through the console's operator client exactly as a single
correction is, while the page follows the batch's progress. A request repeated with the
same batch ID (a second click, a retried POST) sends nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from console.deps import Deps, deps
from console.web import Refused, body_of, dump, ok, text_field, ulid_param
from contracts.bulk.model import BulkBatch, BulkFilter
from contracts.bulk.states import BatchNotFound, BulkError
from contracts.corrections.states import CorrectionMode
from contracts.decisions.guidance import GUIDANCE_MAX_CHARS
from contracts.shared.ids import is_ulid, new_id
from contracts.shared.rules import RuleViolation
from contracts.trust.policy import Identity
from services.bulk import BulkService

log = logging.getLogger(__name__)
REASON_MAX = 1000
_FILTER_FIELDS = ("text", "decision_type", "agent", "path", "since", "until", "plan_status",
                  "state")


def _service(d: Deps) -> BulkService:
    if d.bulk is None:
        raise Refused(404, "bulk corrections are not served by this console")
    return d.bulk


def _filter(body: dict[str, Any]) -> BulkFilter:
    raw = body.get("filter")
    if not isinstance(raw, dict):
        raise Refused(400, "filter must be a JSON object")
    fields = {k: v.strip() if isinstance(v, str) else v for k, v in raw.items()
              if k in _FILTER_FIELDS and v not in (None, "")}
    try:
        return BulkFilter.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Refused(400, f"filter {'.'.join(str(x) for x in first['loc'])}: "
                           f"{first['msg']}") from None


def _mode(body: dict[str, Any]) -> tuple[CorrectionMode, str | None]:
    try:
        mode = CorrectionMode(str(body.get("mode") or "revert"))
    except ValueError:
        raise Refused(400, "mode must be revert or append") from None
    guidance = text_field(body, "guidance", max_chars=GUIDANCE_MAX_CHARS,
                          required=mode is CorrectionMode.APPEND)
    return mode, guidance


def _identity(d: Deps, batch_id: str) -> Identity:
    who = d.bulk_identity(batch_id)
    if isinstance(who, RuleViolation):
        raise Refused(403, f"the bulk correction is refused: {who.rule.value}: {who.message}")
    return who


def _refused(exc: BulkError) -> Refused:
    return Refused(404 if isinstance(exc, BatchNotFound) else 409, str(exc))


def batch_view(b: BulkBatch) -> dict[str, Any]:
    return {**dump(b), "counts": b.counts(), "summary": b.filter.described()}


async def preview(request: Request) -> Response:
    d = deps(request)
    body = await body_of(request)
    where = _filter(body)
    # A dry run needs no guidance: an append's is checked only when it is requested.
    mode, _ = _mode({**body, "guidance": body.get("guidance") or "(dry run)"})
    batch_id = new_id()
    try:
        matched = await _service(d).preview(where, mode, batch_id=batch_id,
                                            identity=_identity(d, batch_id))
    except BulkError as exc:
        raise _refused(exc) from None
    return ok({"batch_id": batch_id, "preview": dump(matched.preview)})


async def request_batch(request: Request) -> Response:
    d = deps(request)
    body = await body_of(request)
    where, (mode, guidance) = _filter(body), _mode(body)
    reason = text_field(body, "reason", max_chars=REASON_MAX, required=True)
    batch_id = str(body.get("batch_id") or new_id())
    if not is_ulid(batch_id):
        raise Refused(400, "batch_id must be a ULID")
    batch_id = batch_id.upper()
    service = _service(d)
    try:
        batch = await service.create(where, mode, guidance, reason or "",
                                     batch_id=batch_id,
                                     identity=_identity(d, batch_id),
                                     requested_by=d.operator_name)
    except BulkError as exc:
        raise _refused(exc) from None
    task = asyncio.create_task(_send(service, batch, d))
    d.bulk_tasks.add(task)
    task.add_done_callback(d.bulk_tasks.discard)
    return ok(batch_view(batch), 202)


async def _send(service: BulkService, batch: BulkBatch, d: Deps) -> None:
    try:
        await service.send(batch, d.ops)
    except Exception:
        # The batch shows what was sent; requesting it again sends the rest.
        log.exception("bulk batch %s stopped sending", batch.batch_id)


async def batches(request: Request) -> Response:
    found = await _service(deps(request)).recent(50)
    return ok({"batches": [batch_view(b) for b in found]})


async def batch(request: Request) -> Response:
    try:
        found = await _service(deps(request)).refresh(ulid_param(request, "batch_id"))
    except BulkError as exc:
        raise _refused(exc) from None
    return ok(batch_view(found))


async def cancel(request: Request) -> Response:
    d = deps(request)
    body = await body_of(request)
    reason = text_field(body, "reason", max_chars=REASON_MAX)
    try:
        found, asked = await _service(d).cancel(ulid_param(request, "batch_id"), d.ops, reason)
    except BulkError as exc:
        raise _refused(exc) from None
    return ok({**batch_view(found), "cancels_sent": asked})
