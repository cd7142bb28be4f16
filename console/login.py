"""Signing in to a console that has a token: the form, its answer, and signing out.

The form POST is the one write that is not JSON (a browser's own form, no script
needed); its body is at most 4 KiB (console.limits) and parsed here rather than with
python-multipart. Attempts are rate-limited per client address and overall
(console.throttle): over the rate the answer is 429 with `Retry-After`, before the token
is looked at. A right token opens a session (console.sessions) whose random ID is the
cookie: HttpOnly, SameSite=Strict, Secure when the console is reached over TLS.
"""

from __future__ import annotations

import html
import math
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from console.security import token_ok
from console.sessions import COOKIE, Sessions
from console.throttle import LoginThrottle

LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Decision ledger console: sign in</title><link rel="stylesheet" href="/static/app.css">
</head><body class="login"><form method="post" action="/login">
<h1>Decision ledger console</h1><p>{message}</p>
<label>Console token <input type="password" name="token" autofocus required></label>
<button type="submit">Sign in</button></form></body></html>"""

Handler = Callable[[Request], Awaitable[Response]]


def page(message: str, status: int = 200, headers: dict[str, str] | None = None
         ) -> HTMLResponse:
    return HTMLResponse(LOGIN_PAGE.format(message=html.escape(message)), status,
                        headers=headers)


def login_routes(token: str | None, sessions: Sessions, throttle: LoginThrottle
                 ) -> tuple[Handler, Handler]:
    """The handlers of /login (GET and POST) and /logout (POST)."""

    async def login(request: Request) -> Response:
        if request.method == "GET" or token is None:
            return page("This console needs its token.")
        client = request.client.host if request.client else "unknown"
        wait = throttle.attempt(client)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            return page(f"Too many sign-in attempts; try again in {seconds} s.", 429,
                        {"Retry-After": str(seconds)})
        raw = await request.body()
        given = parse_qs(raw.decode("utf-8", "replace")).get("token", [""])[0]
        if not token_ok(given, token):
            return page("Wrong token; try again.", 401)
        throttle.succeeded(client)
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, sessions.open(), max_age=int(sessions.lifetime),
                            httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def logout(request: Request) -> Response:
        sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/login" if token is not None else "/", 303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict",
                               secure=request.url.scheme == "https")
        return response

    return login, logout
