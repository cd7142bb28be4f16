"""What the ledger writes when a checked (or judged) invariant is broken by a decision.

Granularity (docs/invariants.md, Checked invariants): a plan gets one
invariant_enforced decision per invariant when it starts (the reconciler, as before);
an evaluation that passes writes nothing; each broken or unevaluated invariant of a
decision writes

- one `InvariantViolation` (found_by check or judge, the invariant's severity), announced
  INVARIANT_VIOLATED on invariants.events.<plan_id>.violated;
- one invariant_enforced decision saying what happened to the decision: under it
  when it was recorded (held or recorded), under its parent when it was refused (the
  refused decision is not in the tree; its place is).

So writes grow with violations, never with decisions. Every ID is derived from the
decision, the invariant and what happened, nothing from the clock: a redelivered batch
writes the same records, which the store keeps once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from ulid import ULID

from contracts.decisions.context import ContextSnapshot
from contracts.decisions.model import Decision
from contracts.decisions.subjects import recorded
from contracts.decisions.types import DecisionType
from contracts.invariants.evaluation import Evaluation, Verdict
from contracts.invariants.holds import Hold
from contracts.invariants.model import MAX_TEXT, Invariant
from contracts.invariants.reconciliation import invariant_text_hash, wire_body
from contracts.invariants.severity import Consequence
from contracts.invariants.violations import FoundBy, InvariantViolation
from contracts.invariants.wire import ViolationEvent, ViolationEventType
from contracts.shared.outgoing import OutgoingEvent


@dataclass(frozen=True, slots=True)
class Outcome:
    """One invariant a decision did not keep, and what the decision got for it."""

    decision: Decision
    invariant: Invariant
    evaluation: Evaluation
    consequence: Consequence
    found_by: FoundBy = FoundBy.CHECK

    @property
    def kind(self) -> str:
        return f"{self.found_by.value}:{self.consequence.value}"


@dataclass(frozen=True, slots=True)
class Found:
    """A violation the ledger found, with what announces it (in its outbox order)."""

    violation: InvariantViolation
    messages: tuple[OutgoingEvent, ...]


@dataclass(frozen=True)
class GateEffects:
    """Everything a batch's gate writes in the recorder's transaction."""

    found: list[Found] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.found or self.holds)


def derived_id(decision_id: str, *parts: str) -> str:
    """A ULID that is a pure function of the decision and `parts`: the decision's 48-bit
    time (it sorts with it) and 80 bits of a hash of them all."""
    time_part = ULID.from_str(decision_id).bytes[:6]
    digest = hashlib.sha256(":".join((decision_id.upper(), *parts)).encode()).digest()
    return str(ULID.from_bytes(time_part + digest[:10]))


_WHAT = {
    Consequence.REFUSE: "refused decision {id}",
    Consequence.HOLD: "held decision {id} for a person's approval",
    Consequence.RECORD: "recorded decision {id} with the violation",
}


def enforced_outcome(o: Outcome) -> Decision:
    """The invariant_enforced decision recording `o`: under the decision, or under its
    parent when the gate refused it (it is not in the tree; a decision the judge
    refuses was recorded, and its record goes under it)."""
    d, inv = o.decision, o.invariant
    verdict = "not kept" if o.evaluation.verdict is Verdict.BROKEN else "not evaluated"
    unrecorded = o.consequence is Consequence.REFUSE and o.found_by is FoundBy.CHECK
    parent = d.parent_decision_id if unrecorded else d.decision_id
    return Decision(
        decision_id=derived_id(d.decision_id, o.invariant.id, o.kind, "enforced"),
        plan_id=d.plan_id, parent_decision_id=parent,
        decision_type=DecisionType.INVARIANT_ENFORCED,
        question=f"Invariant {inv.name}",
        chosen_option=_WHAT[o.consequence].format(id=d.decision_id),
        confidence_score=1.0,
        context_snapshot=ContextSnapshot(hot_context_hash=invariant_text_hash(inv),
                                         hot_context_ref=f"invariant:{inv.id}"),
        rationale=_clip(f"{inv.severity.value} invariant {inv.name} ({inv.id}) {verdict} "
                        f"({o.found_by.value}): {o.evaluation.detail}"))


def violation_of(o: Outcome, now: datetime) -> InvariantViolation:
    d = o.decision
    return InvariantViolation(
        violation_id=derived_id(d.decision_id, o.invariant.id, o.kind, "violation"),
        invariant_id=o.invariant.id, plan_id=d.plan_id, decision_id=d.decision_id,
        severity=o.invariant.severity, found_by=o.found_by, reported_at=now,
        details=_clip(f"{d.decision_type.value} {d.decision_id} "
                      f"({o.consequence.value}): {o.evaluation.detail or 'no reason given'}"))


def found(o: Outcome, now: datetime, plan_blocked: bool) -> Found:
    """The violation of `o`, its INVARIANT_VIOLATED event and its invariant_enforced
    decision (sent to the recorder like any agent's)."""
    v = violation_of(o, now)
    event = ViolationEvent(event_type=ViolationEventType.INVARIANT_VIOLATED, violation=v,
                           invariant_name=o.invariant.name, plan_blocked=plan_blocked)
    enforced = enforced_outcome(o)
    return Found(v, (
        OutgoingEvent(event.subject, event.model_dump_json().encode(), event.msg_id),
        OutgoingEvent(recorded(enforced.plan_id), wire_body(enforced), enforced.decision_id)))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"
