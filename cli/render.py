"""Shared output: one JSON document on stdout for scripts, Rich for people.

With --json nothing but the JSON reaches stdout (errors go to stderr through
cli.errors), so `agents ... --json | jq` never has to skip a banner.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from contracts.corrections.states import CorrectionStatus
from contracts.decisions.plans import PlanStatus
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
}
"""Colours by status value (the enums are str, so a status read as text finds its own)."""


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def dump(model: Any, **kwargs: Any) -> Any:
    """A pydantic model as JSON-ready data."""
    return model.model_dump(mode="json", **kwargs)


def short(ulid: str | None) -> str:
    """The last 8 characters: a ULID's first 10 encode the time, so siblings share them."""
    return "-" if ulid is None else "…" + ulid[-8:]


def status_text(status: str | None) -> str:
    if status is None:
        return "[dim]-[/]"
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def risk_text(risk: str) -> str:
    return f"[bold {RISK_STYLE.get(risk, 'white')}]{risk}[/]"


def clip(text: str | None, width: int = 60) -> str:
    if text is None:
        return ""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def when(value: Any) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")
