"""`agents console`: the operator console in the browser (docs/console.md).

It opens the ledger once (console.wiring, through the bootstrap) with the same
NATS_URL / MONGODB_URI / MONGODB_DB as the other commands, reads through the same read
port, and writes only through the operator client (corrections), the invariant service
(resolve) and the dead-letter service (retry), as `agents` does. Bound to 127.0.0.1 unless told
otherwise; any other address needs CONSOLE_TOKEN.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Annotated

import typer

from cli.context import settings_from_env
from cli.errors import USAGE_ERROR, fail

if TYPE_CHECKING:
    from bootstrap.settings import Settings
    from console.config import ConsoleConfig
    from console.deps import Deps


def config_from(host: str | None, port: int | None) -> ConsoleConfig:
    from console.config import ConsoleConfig, ConsoleConfigError

    try:
        return ConsoleConfig.from_env(host, port)
    except ConsoleConfigError as exc:
        fail(f"console not started: {exc}", USAGE_ERROR)


def connector(settings: Settings, config: ConsoleConfig
              ) -> Callable[[], AbstractAsyncContextManager[Deps]]:
    """Opens the console's dependencies when the server starts, once; its writes are
    made as the console's principal (CONSOLE_PRINCIPAL)."""
    from console.wiring import open_deps

    return lambda: open_deps(settings, config.principal)


def console(
    host: Annotated[str | None, typer.Option(
        help="Address to listen on (CONSOLE_HOST; default 127.0.0.1). Any address beyond "
        "this machine needs CONSOLE_TOKEN.")] = None,
    port: Annotated[int | None, typer.Option(
        min=0, max=65535, help="Port (CONSOLE_PORT; default 8090).")] = None,
) -> None:
    """Serve the operator console: plans, live trees, corrections, dead letters, invariants."""
    from bootstrap.nats_source import NatsUnavailable
    from console.app import run_console
    from contracts.shared.urls import redact

    config = config_from(host, port)
    settings = settings_from_env()
    typer.echo(f"console on {config.url} as {config.principal}"
               + ("  (token required)" if config.token else ""))
    try:
        asyncio.run(run_console(config, connector(settings, config)))
    except KeyboardInterrupt:
        pass
    except NatsUnavailable as exc:
        fail(f"console stopped: cannot reach NATS at NATS_URL={redact(settings.nats_url)} "
             f"({exc})")
    except OSError as exc:
        fail(f"console stopped: {exc}")


class Background:
    """The console beside the workers in `agents up`: its own thread and event loop, so
    neither the workers' signal handling nor their loop is shared."""

    def __init__(self, config: ConsoleConfig, settings: Settings) -> None:
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self.error: BaseException | None = None

        def main() -> None:
            from console.app import run_console

            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(run_console(
                    config, connector(settings, config), self._stop))
            except BaseException as exc:  # reported by `stop`, never raised in a thread
                self.error = exc
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=main, name="console", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout)
