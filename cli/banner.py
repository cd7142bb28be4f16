"""The panel `agents up` prints once everything it started is up: where each server is,
where the data and logs are, and what this development run does not make durable."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from bootstrap.setting_types import StreamProfile
from contracts.shared.urls import redact
from deploy.embedded import ManagedServer

if TYPE_CHECKING:
    from bootstrap.settings import Settings

terminal = Console()
"""stdout, with Rich's highlighting (the panel and the export line)."""


def banner(settings: Settings, data_dir: Path, servers: list[ManagedServer],
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
    table.add_row(*artifacts_row(settings))
    table.add_row(*signatures_row(settings))
    if servers:
        table.add_row("data dir", escape(str(data_dir)))
        for server in servers:
            table.add_row(f"{server.name} log", escape(str(server.log_path)))
    if exports:
        table.add_row("other shells", "run the export line below")
    for line in not_durable(settings, set(started)):
        table.add_row("[yellow]not durable[/]", f"[yellow]{escape(line)}[/]")
    stops = "the workers, then the servers" if servers else "the workers"
    table.add_row("", f"[dim]Ctrl-C stops {stops}[/]")
    return Panel(table, title="agents up", border_style="green", expand=False)


def signatures_row(settings: Settings) -> tuple[str, str]:
    """Whether unsigned messages are accepted (docs/security.md): said, not implied."""
    if settings.require_signatures:
        return "signatures", "required (REQUIRE_SIGNATURES): unsigned messages are refused"
    verified = (f"signed ones verified against {escape(str(settings.ledger_principals))}"
                if settings.ledger_principals else "nothing verified (no LEDGER_PRINCIPALS)")
    return ("[yellow]signatures[/]", "[yellow]not required (REQUIRE_SIGNATURES off): unsigned "
            f"messages are recorded unverified, naming no principal; {verified}[/]")


def artifacts_row(settings: Settings) -> tuple[str, str]:
    """Where reverts copy artifacts from, or plainly that they copy nothing."""
    if settings.artifacts_root is None:
        return ("[yellow]archiving off[/]", "[yellow]ARTIFACTS_ROOT is unset: a revert's "
                "archive lists the artifacts in its manifest, copies none "
                "(--artifacts-root DIR, the folder the agents write to)[/]")
    return ("artifacts", escape(str(settings.artifacts_root)) +
            "  [dim](ARTIFACTS_ROOT: agents write here, reverts archive copies from it)[/]")


def not_durable(settings: Settings, started: set[str]) -> list[str]:
    """What this development run does not make durable, for the banner: honest about the
    servers it started, silent about those the environment gave."""
    from workers.stream_config import PRODUCTION_REPLICAS, limits_for

    lines: list[str] = []
    limits = limits_for(settings)
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


def export_line(exports: dict[str, str]) -> str:
    """Quoted, because a Mongo URI's `?` is a glob in zsh."""
    return "export " + " ".join(f"{key}={shlex.quote(value)}" for key, value in exports.items())
