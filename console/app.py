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

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console.api import routes
from console.config import ConsoleConfig
from console.deps import Deps
from console.limits import BodyLimit
from console.login import login_routes
from console.security import Guard
from console.sessions import Sessions
from console.throttle import LoginThrottle
from console.web import Refused

log = logging.getLogger("console")

STATIC = Path(__file__).parent / "static"


async def refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return JSONResponse({"error": str(exc)}, exc.status)


def with_principal(page: str, principal: str) -> str:
    """The page with the principal the console acts as at the end of its header."""
    badge = (f'<span id="principal" class="principal" title="the operator principal this '
             f'console acts as">as {html.escape(principal)}</span>')
    return page.replace("</header>", f"  {badge}\n</header>", 1)


def create_app(deps: Deps, config: ConsoleConfig) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await deps.hub.start()
        try:
            yield
        finally:
            await deps.hub.stop()

    async def index(request: Request) -> Response:
        page = (STATIC / "index.html").read_text(encoding="utf-8")
        return HTMLResponse(with_principal(page, config.principal),
                            headers={"Cache-Control": "no-store"})

    sessions = Sessions()
    login, logout = login_routes(config.token, sessions, LoginThrottle())
    app = Starlette(
        routes=[Route("/", index), Route("/login", login, methods=["GET", "POST"]),
                Route("/logout", logout, methods=["POST"]),
                *routes(), Mount("/static", StaticFiles(directory=STATIC), name="static")],
        exception_handlers={Refused: refused},
        lifespan=lifespan)
    app.state.deps = deps
    app.state.sessions = sessions
    # The last added runs first: the guard (host, origin, token) before any body is read.
    app.add_middleware(BodyLimit)
    app.add_middleware(Guard, token=config.token, served_under=config.served_under(),
                       sessions=sessions)
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
