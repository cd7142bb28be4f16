"""Root of the `agents` command (pyproject.toml's [project.scripts] entry points here).

Each group of commands lives in its own module and is attached below, so adding a
group is one import and one line. The group modules import the heavy stack (the
bootstrap, nats, pydantic models) inside the commands, so `agents --help` stays instant.
`cli.console` is the command that serves the web console.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperOption

from cli import (
    approvals,
    audit,
    bulk,
    console,
    corrections,
    dead_letters,
    erase,
    invariants,
    plan,
    retention,
    run,
    search,
    status,
    webhooks,
)


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value, so its help shows no type: Typer's own `<bool>` beside
    `--dry-run` reads as if it wanted one, and `--dry-run true` then fails."""
    if self.is_flag:
        return None
    return _typed(self, ctx)


_typed = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    name="agents",
    help="Decision ledger for AI-agent plans.",
    no_args_is_help=True,
    # User mistakes are reported by cli.errors.fail; anything else is a bug, and then a
    # plain traceback is more useful than a boxed one with local variables.
    pretty_exceptions_enable=False,
)

run.register(app)
app.command("status")(status.status)
app.command("console")(console.console)
app.command("erase")(erase.erase)
app.command("search")(search.search)
app.add_typer(bulk.app, name="bulk")
app.add_typer(plan.app, name="plan")
app.add_typer(corrections.app, name="correction")
app.add_typer(invariants.app, name="invariant")
app.add_typer(approvals.app, name="approval")
app.add_typer(dead_letters.app, name="dead-letters")
app.add_typer(audit.app, name="audit")
app.add_typer(retention.app, name="retention")
app.add_typer(webhooks.app, name="webhook")


if __name__ == "__main__":
    app()
