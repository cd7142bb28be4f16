"""The request side of every route: IDs checked to be ULIDs before anything is read,
numbers bounded, bodies bounded and JSON objects; a refusal is a 4xx `Refused` whose
message the client shows as the CLI shows its one-line errors.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse

from contracts.shared.ids import is_ulid

BODY_MAX = 64 * 1024


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


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
    if len(raw) > BODY_MAX:
        raise Refused(413, "the request body is over 64 KiB")
    try:
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
