"""Shared output: one JSON document on stdout for scripts, Rich for people, plain text
for pipes.

With --json nothing but the JSON reaches stdout (errors go to stderr through
cli.errors), so `agents ... --json | jq` never has to skip a banner. When stdout is not
a terminal (`agents correction list | grep ID`), text output is plain and uncut: no
colour, no wrapping, tables as tab-separated lines with a header, every ID whole.
On a terminal, table columns that hold IDs are never cut either; only `plan tree`
shortens IDs (to their last 8 characters, `--full-ids` keeps them whole).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from contracts.corrections.states import CorrectionStatus
from contracts.decisions.plan_states import PlanStatus
from contracts.impact.risk import RiskLevel

out = Console(highlight=False)
"""The terminal's stdout, for what people read (Rich markup; never with --json)."""

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]

RISK_STYLE: dict[str, str] = {RiskLevel.LOW: "green", RiskLevel.MEDIUM: "yellow",
                              RiskLevel.HIGH: "red"}
STATUS_STYLE: dict[str, str] = {
    CorrectionStatus.PENDING: "white", CorrectionStatus.ANALYZING: "cyan",
    CorrectionStatus.EXECUTING: "blue", CorrectionStatus.APPLIED: "green",
    CorrectionStatus.FAILED: "red", CorrectionStatus.CANCELLED: "yellow",
    PlanStatus.ACTIVE: "green", PlanStatus.ROLLED_BACK: "red", PlanStatus.COMPLETED: "blue",
    PlanStatus.ABANDONED: "yellow", "queued": "magenta",
}
"""Colours by status value (the enums are str, so a status read as text finds its own)."""


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def dump(model: Any, **kwargs: Any) -> Any:
    """A pydantic model as JSON-ready data."""
    return model.model_dump(mode="json", **kwargs)


class _Ids:
    shorten = False
    """Set by `plan tree` on a terminal without --full-ids: IDs print as `…` + their last
    8 characters (a ULID's first 10 encode the time, so siblings share them, and the
    last 8 are what `agents` accepts as a suffix)."""


ids = _Ids()


def short(ulid: str | None) -> str:
    """An ID as printed: whole, or its last 8 characters in a shortened tree."""
    if ulid is None:
        return "-"
    return "…" + ulid[-8:] if ids.shorten else ulid


def piped() -> bool:
    """Whether stdout is not a terminal (a pipe, a file, a test's capture)."""
    return not out.is_terminal


PIPE_WIDTH = 10_000
"""The width a pipe is drawn at: wider than any line (a tree's), so none is cut."""


def start() -> None:
    """Called as each command starts: text for a pipe is neither wrapped nor cut, and
    IDs print whole unless the command shortens them."""
    plain = piped()
    out.soft_wrap = plain
    if plain:
        out.width = PIPE_WIDTH
    ids.shorten = False


def table(columns: list[str], rows: list[list[str]], *, ids_in: set[int] | None = None,
          title: str | None = None) -> None:
    """A table: on a terminal, Rich's, whose ID columns (`ids_in`, by index) are never cut
    or wrapped; for a pipe, a header line and one tab-separated line per row, plain."""
    if piped():
        # Written as is: Rich would expand the tabs into spaces.
        lines = [title] if title else []
        lines += ["\t".join(Text.from_markup(c).plain.replace("\t", " ").replace("\n", " ")
                             for c in cells) for cells in [columns, *rows]]
        out.file.write("".join(line + "\n" for line in lines))
        return
    from rich.table import Table

    grid = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        if ids_in and i in ids_in:
            grid.add_column(name, no_wrap=True, min_width=26, overflow="fold")
        else:
            grid.add_column(name, overflow="fold")
    for cells in rows:
        grid.add_row(*cells)
    out.print(grid)


def status_text(status: str | None) -> str:
    if status is None:
        return "[dim]-[/]"
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def risk_text(risk: str) -> str:
    return f"[bold {RISK_STYLE.get(risk, 'white')}]{risk}[/]"


def clip(text: str | None, width: int = 60) -> str:
    """Text on one line, cut to `width` on a terminal; whole for a pipe."""
    if text is None:
        return ""
    one_line = " ".join(text.split())
    if piped():
        return one_line
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def when(value: Any) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float) -> str:
    """A duration as people read it: 79 s, 12 min 4 s, 2 h 5 min."""
    whole = round(value)
    if whole < 60:
        return f"{value:.1f} s" if value < 10 else f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
