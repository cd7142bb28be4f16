"""`agents up` and `agents workers`: the two ways to run the worker app.

`up` is for one machine: it starts whatever servers the environment does not already
point at (cli.servers), runs the workers in this process, and on Ctrl-C / SIGTERM stops
the workers first (so in-flight batches are acked against live servers) and the servers
last. `workers` is the production entry point and never starts a server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.logging import RichHandler

from cli import banner, servers
from cli.context import settings_from_env
from cli.errors import USAGE_ERROR, err, fail
from contracts.shared.urls import redact
from deploy.embedded import EmbeddedServerError, ManagedServer, ensure_port_free

if TYPE_CHECKING:
    from bootstrap.settings import Settings
    from cli.console import Background
    from console.config import ConsoleConfig

log = logging.getLogger("cli")


def register(app: typer.Typer) -> None:
    """Attach the run commands to the root app (kept here so cli.main stays a table of contents)."""
    app.command("up")(up)
    app.command("workers")(workers)


async def _run_app(settings: Settings, on_ready: Callable[[], None] | None = None) -> None:
    from workers.app import build_app
    from workers.collector import tune

    app = build_app(settings)
    tune()
    if on_ready is not None:
        # Registered after build_app's own hooks, so it fires once consumers are pulling.
        @app.after_startup
        async def announce() -> None:
            on_ready()

    # FastStream installs its own SIGINT/SIGTERM handlers here and returns after a
    # graceful shutdown, which is what lets `up` stop the servers afterwards.
    await app.run()


def _run_workers(settings: Settings, on_ready: Callable[[], None] | None = None) -> None:
    # Imported here, not at the top: the worker stack takes over a second to import, and
    # `agents --help`, a mistyped flag or a taken port should answer at once.
    import nats.errors

    from bootstrap.reachability import StartupFailed, describe
    from contracts.shared.persistence import StoreFailure

    try:
        asyncio.run(_run_app(settings, on_ready))
    except StartupFailed as exc:
        fail(str(exc))
    except StoreFailure as exc:
        fail(f"workers stopped: MongoDB at {redact(settings.mongodb_uri)} (MONGODB_URI): "
             f"{describe(exc, settings.connect_timeout_seconds)}")
    except (nats.errors.Error, OSError) as exc:
        fail(f"workers stopped: NATS at {redact(settings.nats_url)} (NATS_URL): "
             f"{describe(exc, settings.connect_timeout_seconds)}")


def _console_config(no_console: bool, console_port: int | None) -> ConsoleConfig | None:
    """The web console's configuration, its port checked free; None with --no-console."""
    from cli.console import config_from

    if no_console:
        return None
    config = config_from(None, console_port)
    try:
        ensure_port_free(config.host, config.port, "the console", "--console-port")
    except EmbeddedServerError as exc:
        fail(str(exc), USAGE_ERROR)
    return config


def _with_roots(base: Settings, data_dir: Path, artifacts_root: Path | None) -> Settings:
    """The archive beside the servers' data (outside the agents' tree) unless
    ARCHIVE_ROOT says otherwise; --artifacts-root unless ARTIFACTS_ROOT is set."""
    changes: dict[str, Path] = {}
    if base.archive_root is None:
        changes["archive_root"] = data_dir / "archive"
    if base.artifacts_root is None and artifacts_root is not None:
        changes["artifacts_root"] = artifacts_root.expanduser().resolve()
    try:
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]
    except ValueError as exc:
        fail(f"bad value in the environment or the options: {exc}", USAGE_ERROR)


def _start_console(config: ConsoleConfig | None, settings: Settings) -> Background | None:
    """The web console beside the workers, in its own thread; None with --no-console."""
    if config is None:
        return None
    from cli.console import Background

    background = Background(config, settings)
    background.start()
    return background


def _run_here(base: Settings, started: list[ManagedServer], data_dir: Path,
              health_addr: str, console: ConsoleConfig | None) -> None:
    """Settings pointed at what was started, the console, the banner; then the workers
    run until they are stopped, and the console stops after them."""
    urls = {server.name: server.url for server in started}
    settings = dataclasses.replace(
        base, nats_url=urls.get("nats", base.nats_url),
        mongodb_uri=urls.get("mongo", base.mongodb_uri), health_addr=health_addr,
        # Development: a plain mongod from MONGODB_URI is accepted here (the banner says
        # so); `agents workers` refuses it without the flag.
        allow_standalone_mongodb=True)
    exports = {"NATS_URL": urls["nats"]} if "nats" in urls else {}
    if "mongo" in urls:
        exports["MONGODB_URI"] = urls["mongo"]
    if settings.artifacts_root is not None and not os.environ.get("ARTIFACTS_ROOT"):
        exports["ARTIFACTS_ROOT"] = str(settings.artifacts_root)  # for the agents
    background = _start_console(console, settings)
    try:
        banner.terminal.print(banner.banner(settings, data_dir, started, exports,
                                            console.url if console else None))
        if exports:
            # Outside the panel and never wrapped, so it copies as one shell line.
            banner.terminal.print(banner.export_line(exports), soft_wrap=True,
                                  highlight=False, markup=False)
        _run_workers(settings, on_ready=lambda: log.info("workers running"))
    finally:
        if background is not None:
            background.stop()


def up(
    *,
    data_dir: Annotated[Path, typer.Option(
        help="Where the started servers keep their data and logs; survives restarts.",
    )] = Path(".agents-data"),
    nats_port: Annotated[int, typer.Option(min=1, max=65535, help="Port for nats-server.")] = 4222,
    mongo_port: Annotated[int, typer.Option(
        min=1, max=65535, help="Port for secantusd-py (MongoDB wire protocol).",
    )] = 27017,
    host: Annotated[str, typer.Option(help="Interface the started servers listen on.")] = (
        "127.0.0.1"
    ),
    health_port: Annotated[int, typer.Option(
        min=0, max=65535, help="Port of the workers' /healthz and /readyz (HEALTH_ADDR wins).",
    )] = 8081,
    console_port: Annotated[int | None, typer.Option(
        min=0, max=65535, help="Port of the operator console (CONSOLE_PORT; default 8090); "
        "it listens on CONSOLE_HOST, 127.0.0.1 unless set.")] = None,
    no_console: Annotated[bool, typer.Option(
        "--no-console", help="Do not start the operator console.")] = False,
    artifacts_root: Annotated[Path | None, typer.Option(
        help="The folder the agents write their artifacts to (ARTIFACTS_ROOT wins): reverts "
        "archive copies from it. Unset: archiving is off, a revert's archive is a manifest.",
    )] = None,
) -> None:
    """Start the servers NATS_URL / MONGODB_URI do not point at, then run all workers."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", force=True,
                        handlers=[RichHandler(console=err, show_path=False)])
    data_dir = data_dir.expanduser().resolve()
    base = _with_roots(settings_from_env(), data_dir, artifacts_root)
    nats_wanted = None if os.environ.get("NATS_URL") else nats_port
    mongo_wanted = None if os.environ.get("MONGODB_URI") else mongo_port
    health_addr = base.health_addr or f"{host}:{health_port}"
    console = _console_config(no_console, console_port)
    servers.preflight(host, nats_wanted, mongo_wanted, data_dir,
                      None if base.health_addr else health_port)
    servers.check_given(base, nats_given=nats_wanted is None,
                        mongo_given=mongo_wanted is None)
    started: list[ManagedServer] = []
    try:
        with servers.terminate_unwinds():
            servers.start_servers(started, data_dir, host, nats_wanted, mongo_wanted)
            _run_here(base, started, data_dir, health_addr, console)
    except KeyboardInterrupt:
        # A signal before the worker app installed its handlers: still a clean stop.
        log.info("interrupted during startup")
    finally:
        servers.stop_servers(started)
    log.info("stopped")


def workers() -> None:
    """Run all workers against NATS_URL / MONGODB_URI; never starts a server."""
    from workers.logs import configure

    settings = settings_from_env()
    configure(settings.log_format, settings.log_level)
    log.info("workers for %s and %s/%s", redact(settings.nats_url),
             redact(settings.mongodb_uri), settings.mongodb_db)
    try:
        _run_workers(settings)
    except KeyboardInterrupt:
        log.info("interrupted during startup")
