"""How every command reports a user mistake: one red line on stderr and a non-zero exit.

Kept in one place so later sub-apps (plan, correction, dead-letters, ...) fail the same
way and nobody is tempted to let a traceback reach a user who only mistyped a flag.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

err = Console(stderr=True)
"""The terminal's stderr, for errors and the log lines of `agents up`."""

USAGE_ERROR = 2
RUNTIME_ERROR = 1


def fail(message: str, code: int = RUNTIME_ERROR) -> NoReturn:
    """Exit with `message`; markup is escaped because messages quote paths and URLs."""
    err.print(f"[bold red]error:[/] [red]{escape(message)}[/]", highlight=False,
                      soft_wrap=True)
    raise typer.Exit(code)
