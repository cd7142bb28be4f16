"""`agents up` and `agents workers`: the two ways to run the worker app.

`up` is for one machine: it starts whatever servers the environment does not already
point at, runs the workers in this process, and on Ctrl-C / SIGTERM stops the workers
first (so in-flight batches are acked against live servers) and the servers last.
`workers` is the production entry point and never starts a server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shlex
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from cli.errors import USAGE_ERROR, err_console, fail
from contracts.shared.urls import redact
from deploy.embedded import (
    EmbeddedServerError,
    ManagedServer,
    ensure_port_free,
    start_mongo,
    start_nats,
)
from workers.settings import Settings

log = logging.getLogger("cli")
console = Console()

NATS_FLAG = "--nats-port"
MONGO_FLAG = "--mongo-port"
HEALTH_FLAG = "--health-port"

def register(app: typer.Typer) -> None:
    """Attach the run commands to the root app (kept here so cli.main stays a table of contents)."""
    app.command("up")(up)
    app.command("workers")(workers)


def _settings_from_env() -> Settings:
    try:
        return Settings.from_env()
    except ValueError as exc:
        fail(f"bad value in the environment: {exc}", USAGE_ERROR)


async def _run_app(settings: Settings, on_ready: Callable[[], None] | None = None) -> None:
    from workers.app import build_app  # noqa: PLC0415 - see _run_workers

    app = build_app(settings)
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
    import nats.errors  # noqa: PLC0415
    from pymongo.errors import PyMongoError  # noqa: PLC0415

    from workers.connections import StartupFailed, describe  # noqa: PLC0415

    try:
        asyncio.run(_run_app(settings, on_ready))
    except StartupFailed as exc:
        fail(str(exc))
    except PyMongoError as exc:
        fail(f"workers stopped: MongoDB at {redact(settings.mongodb_uri)} (MONGODB_URI): "
             f"{describe(exc, settings.connect_timeout_seconds)}")
    except (nats.errors.Error, OSError) as exc:
        fail(f"workers stopped: NATS at {redact(settings.nats_url)} (NATS_URL): "
             f"{describe(exc, settings.connect_timeout_seconds)}")


@contextmanager
def _terminate_unwinds() -> Iterator[None]:
    """Make SIGTERM unwind like Ctrl-C until the worker app takes over the signals.

    The servers run in their own session, so the default SIGTERM action would kill only
    this process and leave them orphaned, holding the ports and the data dir.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop_servers(servers: list[ManagedServer]) -> None:
    """Stop in reverse start order; a second Ctrl-C here must not orphan what is left."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for server in reversed(servers):
            log.info("stopping %s (pid %s)", server.name, server.process.pid)
            server.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _banner(settings: Settings, data_dir: Path, servers: list[ManagedServer],
            exports: dict[str, str], console_url: str | None = None) -> Panel:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    started = {server.name: server for server in servers}

    def origin(name: str) -> str:
        return "started here" if name in started else "from the environment"

    table.add_row("NATS", f"{escape(redact(settings.nats_url))}  [dim]({origin('nats')})[/]")
    table.add_row("MongoDB", f"{escape(redact(settings.mongodb_uri))}  "
                             f"[dim]({origin('mongo')})[/]")
    table.add_row("database", escape(settings.mongodb_db))
    if settings.health_addr:
        table.add_row("health", escape(f"http://{settings.health_addr}/readyz") +
                      "  [dim](and /healthz)[/]")
    if console_url:
        table.add_row("console", escape(console_url) + "  [dim](agents console)[/]")
    table.add_row("archive", escape(str(settings.resolved_archive_root())))
    table.add_row(*_artifacts_row(settings))
    if servers:
        table.add_row("data dir", escape(str(data_dir)))
        for server in servers:
            table.add_row(f"{server.name} log", escape(str(server.log_path)))
    if exports:
        table.add_row("other shells", "run the export line below")
    for line in _not_durable(settings, set(started)):
        table.add_row("[yellow]not durable[/]", f"[yellow]{escape(line)}[/]")
    stops = "the workers, then the servers" if servers else "the workers"
    table.add_row("", f"[dim]Ctrl-C stops {stops}[/]")
    return Panel(table, title="agents up", border_style="green", expand=False)


def _artifacts_row(settings: Settings) -> tuple[str, str]:
    """Where reverts copy artifacts from, or plainly that they copy nothing."""
    if settings.artifacts_root is None:
        return ("[yellow]archiving off[/]", "[yellow]ARTIFACTS_ROOT is unset: a revert's "
                "archive lists the artifacts in its manifest, copies none "
                "(--artifacts-root DIR, the folder the agents write to)[/]")
    return ("artifacts", escape(str(settings.artifacts_root)) +
            "  [dim](ARTIFACTS_ROOT: agents write here, reverts archive copies from it)[/]")


def _not_durable(settings: Settings, started: set[str]) -> list[str]:
    """What this development run does not make durable, for the banner: honest about the
    servers it started, silent about those the environment gave."""
    from workers.stream_config import PRODUCTION_REPLICAS, StreamProfile  # noqa: PLC0415

    lines: list[str] = []
    limits = settings.stream_limits()
    streams = f"streams R{limits.replicas}"
    if settings.stream_profile is StreamProfile.DEVELOPMENT:
        streams += ", no limits, discard old (STREAM_PROFILE=development)"
    if "nats" in started:
        lines.append(f"one NATS node without sync_interval: always (an ack may precede "
                     f"the fsync by up to 2 min); {streams}")
    elif limits.replicas < PRODUCTION_REPLICAS:
        lines.append(streams)
    if "mongo" in started or settings.allow_standalone_mongodb:
        mongo = "one MongoDB node (no failover; majority = that node)" if "mongo" in \
            started else "MongoDB may be standalone"
        lines.append(f"{mongo}; ALLOW_STANDALONE_MONGODB=1")
    return lines


def _export_line(exports: dict[str, str]) -> str:
    """Quoted, because a Mongo URI's `?` is a glob in zsh."""
    return "export " + " ".join(f"{key}={shlex.quote(value)}" for key, value in exports.items())


def _preflight(host: str, nats_port: int | None, mongo_port: int | None,
               data_dir: Path, health_port: int | None = None) -> None:
    """Check the ports and the data dir before starting anything, so a taken Mongo port
    does not first cost a NATS start and stop. `None` means that port is not ours to use."""
    if nats_port is None and mongo_port is None and health_port is None:
        return
    # ensure_port_free reports every bind failure as a taken port; a --host that is not
    # an address of this machine deserves its own message, so probe it first.
    try:
        with socket.socket() as probe:
            probe.bind((host, 0))
    except OSError as exc:
        fail(f"cannot listen on --host {host}: {exc.strerror or exc}", USAGE_ERROR)
    try:
        if nats_port is not None:
            ensure_port_free(host, nats_port, "NATS", NATS_FLAG)
        if mongo_port is not None:
            ensure_port_free(host, mongo_port, "MongoDB (secantusd-py)", MONGO_FLAG)
        if health_port is not None:
            ensure_port_free(host, health_port, "the health endpoint", HEALTH_FLAG)
    except EmbeddedServerError as exc:
        fail(str(exc), USAGE_ERROR)
    if nats_port is None and mongo_port is None:
        return
    if data_dir.exists() and not data_dir.is_dir():
        fail(f"--data-dir {data_dir} is a file, not a directory", USAGE_ERROR)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot use --data-dir {data_dir}: {exc.strerror or exc}", USAGE_ERROR)


def _start_servers(servers: list[ManagedServer], data_dir: Path, host: str,
                   nats_port: int | None, mongo_port: int | None) -> None:
    """Start the needed servers, appending each to the caller's list so its `finally` can
    stop the ones that came up when a later one fails.

    Ctrl-C / SIGTERM are only noted while a server starts: interrupting start_nats or
    start_mongo between spawning the process and returning its handle would leave that
    server running with nobody to stop it. Starting takes seconds, so the wait is short.
    """
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    failure: str | None = None
    try:
        if nats_port is not None:
            servers.append(start_nats(data_dir, port=nats_port, host=host))
        if mongo_port is not None and not received:
            servers.append(start_mongo(data_dir, port=mongo_port, host=host))
    except EmbeddedServerError as exc:
        failure = str(exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt
    if failure is not None:
        fail(failure)


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
                        handlers=[RichHandler(console=err_console, show_path=False)])
    base = _settings_from_env()
    need_nats = not os.environ.get("NATS_URL")
    need_mongo = not os.environ.get("MONGODB_URI")
    data_dir = data_dir.expanduser().resolve()
    base = _with_roots(base, data_dir, artifacts_root)

    health_addr = base.health_addr or f"{host}:{health_port}"
    from cli.console import Background, config_from  # noqa: PLC0415

    console_config = None if no_console else config_from(None, console_port)
    if console_config is not None:
        try:
            ensure_port_free(console_config.host, console_config.port, "the console",
                             "--console-port")
        except EmbeddedServerError as exc:
            fail(str(exc), USAGE_ERROR)
    background: Background | None = None
    _preflight(host, nats_port if need_nats else None, mongo_port if need_mongo else None,
               data_dir, None if base.health_addr else health_port)

    servers: list[ManagedServer] = []
    try:
        with _terminate_unwinds():
            _start_servers(servers, data_dir, host, nats_port if need_nats else None,
                           mongo_port if need_mongo else None)
            started = {server.name: server.url for server in servers}
            settings = dataclasses.replace(
                base,
                nats_url=started.get("nats", base.nats_url),
                mongodb_uri=started.get("mongo", base.mongodb_uri),
                health_addr=health_addr,
                # Development: a plain mongod from MONGODB_URI is accepted here (the
                # banner says so); `agents workers` refuses it without the flag.
                allow_standalone_mongodb=True,
            )
            exports = {"NATS_URL": started["nats"]} if "nats" in started else {}
            if "mongo" in started:
                exports["MONGODB_URI"] = started["mongo"]
            if settings.artifacts_root is not None and not os.environ.get("ARTIFACTS_ROOT"):
                exports["ARTIFACTS_ROOT"] = str(settings.artifacts_root)  # for the agents
            if console_config is not None:
                from cli.correct import requester  # noqa: PLC0415

                background = Background(console_config, settings, requester())
                background.start()
            console.print(_banner(settings, data_dir, servers, exports,
                                  console_config.url if console_config else None))
            if exports:
                # Outside the panel and never wrapped, so it copies as one shell line.
                console.print(_export_line(exports), soft_wrap=True, highlight=False,
                              markup=False)
            _run_workers(settings, on_ready=lambda: log.info("workers running"))
    except KeyboardInterrupt:
        # A signal before the worker app installed its handlers: still a clean stop.
        log.info("interrupted during startup")
    finally:
        if background is not None:
            background.stop()
        _stop_servers(servers)
    log.info("stopped")


def workers() -> None:
    """Run all workers against NATS_URL / MONGODB_URI; never starts a server."""
    from workers.logs import configure  # noqa: PLC0415

    settings = _settings_from_env()
    configure(settings.log_format, settings.log_level)
    log.info("workers for %s and %s/%s", redact(settings.nats_url),
             redact(settings.mongodb_uri), settings.mongodb_db)
    try:
        _run_workers(settings)
    except KeyboardInterrupt:
        log.info("interrupted during startup")
