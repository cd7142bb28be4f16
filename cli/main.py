"""Root of the `agents` command (the console script in pyproject.toml points here).

Each group of commands lives in its own module and is attached below, so adding
`agents plan ...` or `agents dead-letters ...` later is one import and one line.
"""

from __future__ import annotations

import typer

from cli import run

app = typer.Typer(
    name="agents",
    help="Decision ledger for AI-agent plans.",
    no_args_is_help=True,
    # User mistakes are reported by cli.errors.fail; anything else is a bug, and then a
    # plain traceback is more useful than a boxed one with local variables.
    pretty_exceptions_enable=False,
)

run.register(app)


if __name__ == "__main__":
    app()
