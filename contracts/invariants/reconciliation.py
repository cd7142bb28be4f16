"""What the reconciliation worker records for a new plan: one invariant_enforced decision
per effective invariant, under the plan's root.

Everything is derived from the root and the invariant, nothing from the clock, so a
second delivery of the root builds byte-for-byte the same decisions under the same
IDs: JetStream drops them within its duplicate window, and after it the recorder finds
the same decision_id with the same content and records nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ulid import ULID

from contracts.decisions.context import ContextSnapshot
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.invariants.model import Invariant, InvariantScope


def enforced_decision_id(root_decision_id: str, invariant_id: str) -> str:
    """A ULID that is a pure function of (root, invariant): the root's 48-bit time (so it
    sorts with the plan) and 80 bits of a hash of both IDs (so it is unique per pair)."""
    time_part = ULID.from_str(root_decision_id).bytes[:6]
    digest = hashlib.sha256(f"{root_decision_id.upper()}:{invariant_id.upper()}".encode())
    return str(ULID.from_bytes(time_part + digest.digest()[:10]))


def invariant_text_hash(inv: Invariant) -> str:
    """The context an invariant_enforced decision was made in: the invariant's own text."""
    body = f"{inv.scope.value}\n{inv.scope_target or ''}\n{inv.name}\n{inv.description}"
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def _where(inv: Invariant) -> str:
    if inv.scope is InvariantScope.GLOBAL:
        return "GLOBAL invariant"
    if inv.scope is InvariantScope.ACTION:
        return f"ACTION invariant of template {inv.scope_target}, promoted to plan scope"
    return f"{inv.scope.value} invariant of {inv.scope_target}"


STARTED = "in force when the plan started"
PLAN_USE = "promoted to the plan's scope when agents plan use applied its template"


def enforced_decision(root: Decision, inv: Invariant, why: str = STARTED) -> Decision:
    return Decision(
        decision_id=enforced_decision_id(root.decision_id, inv.id),
        plan_id=root.plan_id,
        parent_decision_id=root.decision_id,
        decision_type=DecisionType.INVARIANT_ENFORCED,
        question=f"Invariant {inv.name}",
        chosen_option=inv.description,
        confidence_score=1.0,
        context_snapshot=ContextSnapshot(hot_context_hash=invariant_text_hash(inv),
                                         hot_context_ref=f"invariant:{inv.id}"),
        rationale=f"{_where(inv)} ({inv.id}), {why}.",
    )


def enforced_decisions(root: Decision, effective: Iterable[Invariant]) -> list[Decision]:
    """One invariant_enforced decision per effective invariant, in the order given."""
    return [enforced_decision(root, inv) for inv in effective]


def wire_body(d: Decision) -> bytes:
    """The message an agent would publish: without created_at (the recorder stamps its
    receive time) and without the recorder- and correction-owned fields."""
    return d.model_dump_json(exclude={"created_at", "sequence_number", "superseded_by",
                                      "superseded_at", "superseded_by_correction",
                                      "corrects_decision_id", "is_correction"}).encode()
