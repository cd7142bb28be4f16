"""Who may call the console, and from where.

- Token: when one is configured, every request carries it, as `Authorization: Bearer`
  or the `console_token` cookie set by the login form; compared in constant time.
- Cross-site requests: every write is a POST with a JSON body (a page elsewhere cannot
  send one without a CORS preflight, which the console never answers) and, when the
  browser names its Origin, that origin must be the console's own. The login form (the
  one form POST) is held to the Origin rule too.
- What is shown: agents write rationales, options and guidance, so all of it is hostile
  text. The front end only ever sets it as text (never as HTML), and the content
  security policy forbids inline scripts, so a `<script>` in a rationale stays text.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp

COOKIE = "console_token"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
OPEN_PATHS = frozenset({"/login", "/static/app.css"})
"""Reachable without the token: the login form and the style it uses."""


def same_origin(request: Request) -> bool:
    """True unless the browser says the request comes from another origin."""
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser, or a same-origin GET: the token decides
    if origin == "null":
        return False
    parts = urlsplit(origin)
    return parts.netloc == request.headers.get("host", "")


def token_of(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.cookies.get(COOKIE)


def token_ok(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class Guard(BaseHTTPMiddleware):
    def __init__(self, app: ASGIApp, token: str | None) -> None:
        super().__init__(app)
        self._token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if request.method not in ("GET", "HEAD"):
            if not same_origin(request):
                return JSONResponse({"error": "cross-origin request refused"}, 403)
            if path != "/login" and not request.headers.get("content-type", "").startswith(
                    "application/json"):
                return JSONResponse({"error": "writes take a JSON body"}, 415)
        if self._token is not None and path not in OPEN_PATHS \
                and not token_ok(token_of(request), self._token):
            if request.method == "GET" and not path.startswith("/api/"):
                return RedirectResponse("/login", 303)
            return JSONResponse({"error": "a console token is required"}, 401)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response
