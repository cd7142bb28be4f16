"""How `agents plan tree` words one node: type, option, sequence number, ID (short on a
terminal), confidence, and what else it says (a correction of, superseded by, child
plans with their status, then or now, the corrections that touched it)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.markup import escape

from cli.render import clip, short, status_text

if TYPE_CHECKING:
    from contracts.corrections.record import Correction
    from contracts.decisions.model import Decision
    from contracts.decisions.plans import PlanRecord


def _markers(d: Decision, plans: dict[str, PlanRecord],
             corrections: list[Correction], moment: datetime | None = None) -> str:
    """What else a node says; `moment`: the child plans' status as it was then."""
    out = []
    if d.is_correction:
        out.append(f"[magenta]correction of {short(d.corrects_decision_id)}[/]")
    if d.superseded_by is not None:
        out.append(f"[red]superseded by {short(d.superseded_by)}[/]")
    for p in d.downstream_plan_ids:
        record = plans.get(p)
        status = None if record is None else (
            record.status if moment is None else record.status_at(moment))
        out.append(f"[cyan]→ child plan {short(p)}[/]"
                   + (f" ({status_text(status.value)})" if status else ""))
    for c in corrections:
        if c.decision_id == d.decision_id:
            out.append(f"[yellow]{c.mode.value} {short(c.correction_id)}[/] "
                       f"({status_text(c.status.value)})")
    return ("  " + "  ".join(out)) if out else ""


def node_label(d: Decision, plans: dict[str, PlanRecord], corrections: list[Correction],
           moment: datetime | None = None) -> str:
    conf = "-" if d.confidence_score is None else f"{d.confidence_score:.2f}"
    text = (f"[bold]{d.decision_type.value}[/] {escape(clip(d.chosen_option))}  "
            f"[dim]#{d.sequence_number} {short(d.decision_id)} conf {conf}[/]")
    if d.superseded_by is not None:
        text = f"[strike dim]{d.decision_type.value} {escape(clip(d.chosen_option))}[/]  " \
               f"[dim]#{d.sequence_number} {short(d.decision_id)}[/]"
    return text + _markers(d, plans, corrections, moment)
