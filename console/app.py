"""The console application: routes, static assets, the guard, and its lifespan.

`create_app` takes its dependencies ready-made (console.deps: the read port, the
services, the operator client, the live hub), so the CLI and the tests wire the same
app; `run_console` is the process the CLI starts: it opens the ledger once
(console.wiring), serves until told to stop, and closes what it opened.
"""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console.api import routes
from console.config import ConsoleConfig
from console.deps import Deps
from console.security import COOKIE, Guard, token_ok
from console.web import Refused

log = logging.getLogger("console")

STATIC = Path(__file__).parent / "static"
LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Decision ledger console: sign in</title><link rel="stylesheet" href="/static/app.css">
</head><body class="login"><form method="post" action="/login">
<h1>Decision ledger console</h1><p>{message}</p>
<label>Console token <input type="password" name="token" autofocus required></label>
<button type="submit">Sign in</button></form></body></html>"""


async def refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return JSONResponse({"error": str(exc)}, exc.status)


def create_app(deps: Deps, config: ConsoleConfig) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await deps.hub.start()
        try:
            yield
        finally:
            await deps.hub.stop()

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def login(request: Request) -> Response:
        if request.method == "GET" or config.token is None:
            return HTMLResponse(LOGIN_PAGE.format(message="This console needs its token."))
        # A one-field urlencoded form: parsed here rather than with python-multipart.
        raw = await request.body()
        given = parse_qs(raw[:4096].decode("utf-8", "replace")).get("token", [""])[0]
        if not token_ok(given, config.token):
            return HTMLResponse(LOGIN_PAGE.format(
                message=html.escape("Wrong token; try again.")), 401)
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, given, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    app = Starlette(
        routes=[Route("/", index), Route("/login", login, methods=["GET", "POST"]),
                *routes(), Mount("/static", StaticFiles(directory=STATIC), name="static")],
        exception_handlers={Refused: refused},
        lifespan=lifespan)
    app.state.deps = deps
    app.add_middleware(Guard, token=config.token)
    return app


async def run_console(config: ConsoleConfig,
                      connect: Callable[[], AbstractAsyncContextManager[Deps]],
                      stop: asyncio.Event | None = None,
                      on_ready: Callable[[], None] | None = None) -> None:
    """Serve until `stop` is set (or uvicorn's own signal handling ends it, in the main
    thread). `connect()` opens the Deps for as long as the console serves."""
    import uvicorn  # noqa: PLC0415 - the server is imported only when one is run

    async with connect() as deps:
        app = create_app(deps, config)
        server = uvicorn.Server(uvicorn.Config(
            app, host=config.host, port=config.port, log_level="warning",
            access_log=False, lifespan="on", timeout_graceful_shutdown=2))
        task = asyncio.create_task(server.serve())
        # uvicorn says it is listening only through this flag; the task ends on failure.
        while not server.started and not task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if server.started and on_ready is not None:
            on_ready()
        if stop is not None:
            waiter = asyncio.create_task(stop.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            # Open pages' streams end first: uvicorn waits for every response to finish.
            await deps.hub.stop()
            server.should_exit = True
            waiter.cancel()
        await task
