"""Request bodies over the limit are refused (413) before they are read.

A `Content-Length` over the limit is answered at once, without reading a byte of the
body (the server then closes the connection rather than read it). A body without one
(chunked) is counted as it arrives and refused at the first chunk past the limit, so
at most the limit and one chunk are ever held. Starlette's `request.body()` would
otherwise read any size into memory before a route could look at it.

Limits: the login form is one short field (4 KiB); every JSON write is bounded by
console.web.BODY_MAX (64 KiB); anything else the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from console.web import BODY_MAX

LOGIN_BODY_MAX = 4 * 1024
FORM_PATHS = ("/login", "/logout")


class BodyTooLarge(Exception):
    """Raised from `receive` when a streamed body passes the limit."""


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse({"error": f"the request body is over {limit // 1024} KiB"}, 413,
                        headers={"Connection": "close"})


class BodyLimit:
    """Pure ASGI (it must see `receive` before anyone reads from it)."""

    def __init__(self, app: ASGIApp, default: int = BODY_MAX,
                 per_path: Mapping[str, int] | None = None) -> None:
        self.app = app
        self._default = default
        self._per_path = dict(per_path if per_path is not None
                              else dict.fromkeys(FORM_PATHS, LOGIN_BODY_MAX))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._per_path.get(scope["path"], self._default)
        declared = Headers(scope=scope).getlist("content-length")
        if declared:
            if len(set(declared)) > 1 or not declared[0].strip().isdigit():
                await JSONResponse({"error": "a bad Content-Length"}, 400,
                                   headers={"Connection": "close"})(scope, receive, send)
                return
            if int(declared[0]) > limit:
                await _too_large(limit)(scope, receive, send)
                return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await _too_large(limit)(scope, receive, send)
