"""Who may call the console, and from where.

- Host: only requests addressed to a name the console is served under are answered
  (console.config: the loopback names with its port, its bound address, CONSOLE_HOSTS),
  reads and writes alike: 421 for another name, 400 for none. This is what defeats DNS
  rebinding, where a page's own name is made to resolve to 127.0.0.1: its requests then
  reach the console with `Host` and `Origin` both naming the page, which a same-origin
  check alone would accept.
- Token: when one is configured, every request carries it as `Authorization: Bearer`,
  or carries the session cookie the login form set (console.sessions; the cookie never
  holds the token). The token is compared in constant time.
- Cross-site requests: every write is a POST with a JSON body (a page elsewhere cannot
  send one without a CORS preflight, which the console never answers); when the browser
  names its Origin, that origin must be the console's own; when it says
  `Sec-Fetch-Site`, that must be `same-origin`. The API's reads are refused to a browser
  that says the request came from another site. The login and logout forms (the only
  form POSTs) are held to the same rules.
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

from console.limits import FORM_PATHS
from console.sessions import COOKIE, Sessions

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
OPEN_PATHS = frozenset({"/login", "/logout", "/static/app.css"})
"""Reachable without the token: the login form, the style it uses, and logout (which
only ends the session it is sent with)."""
OTHER_SITES = frozenset({"cross-site", "same-site"})
"""`Sec-Fetch-Site` values of a request a page elsewhere made (same-site: another port
or subdomain of the same site, a different origin all the same)."""


def same_origin(request: Request) -> bool:
    """True unless the browser says the request comes from another origin."""
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser, or a same-origin GET: the token decides
    if origin == "null":
        return False
    parts = urlsplit(origin)
    return parts.netloc.lower() == request.headers.get("host", "").lower()


def token_of(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return None


def token_ok(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _error(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status)


def misdirected(request: Request, served_under: frozenset[str]) -> Response | None:
    """A refusal unless the request names a host the console is served under."""
    host = request.headers.get("host")
    if not host:
        return _error("a request must name the host it is for", 400)
    if host.lower() not in served_under:
        return _error(f"this console is not served under the name {host[:100]!r}; an "
                      "operator may add it to CONSOLE_HOSTS", 421)
    return None


def cross_site(request: Request) -> Response | None:
    """A refusal for what a page elsewhere sent: any write, or a read of the API."""
    fetch_site = request.headers.get("sec-fetch-site")
    if request.method in ("GET", "HEAD"):
        if request.url.path.startswith("/api/") and fetch_site in OTHER_SITES:
            return _error("cross-site request refused", 403)
        return None
    if not same_origin(request) or fetch_site not in (None, "same-origin"):
        return _error("cross-origin request refused", 403)
    if request.url.path not in FORM_PATHS and not request.headers.get(
            "content-type", "").startswith("application/json"):
        return _error("writes take a JSON body", 415)
    return None


class Guard(BaseHTTPMiddleware):
    def __init__(self, app: ASGIApp, token: str | None, served_under: frozenset[str],
                 sessions: Sessions) -> None:
        super().__init__(app)
        self._token = token
        self._served_under = served_under
        self._sessions = sessions

    def _authenticated(self, request: Request) -> bool:
        if self._token is None or request.url.path in OPEN_PATHS:
            return True
        return token_ok(token_of(request), self._token) \
            or self._sessions.valid(request.cookies.get(COOKIE))

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        refused = misdirected(request, self._served_under) or cross_site(request)
        if refused is None and not self._authenticated(request):
            if request.method == "GET" and not request.url.path.startswith("/api/"):
                refused = RedirectResponse("/login", 303)
            else:
                refused = _error("a console token is required", 401)
        response = refused or await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response
