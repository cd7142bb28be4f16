"""How decisions and corrections travel to the page: the fields a list or a tree node
shows, and what an operator may do to a correction now."""

from __future__ import annotations

from typing import Any

from console.web import dump
from contracts.corrections.record import Correction
from contracts.corrections.states import CANCELLABLE, OPERATOR_FAILABLE, RETRYABLE, CorrectionStatus
from contracts.decisions.model import Decision

BRIEF_FIELDS = ("decision_id", "plan_id", "parent_decision_id", "sequence_number",
                "decision_type", "question", "chosen_option", "confidence_score",
                "superseded_by", "is_correction", "corrects_decision_id", "created_at",
                "downstream_plan_ids")


def brief(d: Decision) -> dict[str, Any]:
    data: dict[str, Any] = dump(d, include=set(BRIEF_FIELDS))
    data["phase"] = d.decision_type.phase.value
    return data


def correction_brief(c: Correction) -> dict[str, Any]:
    return {"correction_id": c.correction_id, "plan_id": c.plan_id,
            "decision_id": c.decision_id, "mode": c.mode.value, "status": c.status.value,
            "requested_by": c.requested_by, "requested_at": c.requested_at.isoformat(),
            "guidance": c.guidance[:300], "new_decision_id": c.new_decision_id,
            "error": c.error, "actions": actions(c.status)}


def actions(status: CorrectionStatus) -> list[str]:
    """What an operator may do now, from the lifecycle's own sets."""
    out = []
    if status in CANCELLABLE:
        out.append("cancel")
    if status in OPERATOR_FAILABLE:
        out.append("fail")
    if status in RETRYABLE:
        out.append("retry")
    return out
