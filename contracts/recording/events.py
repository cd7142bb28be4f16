"""The recorder's events: a decision persisted, a message rejected, and reading the
persisted event back (the reconciler's input)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.recording.facts import Resume
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES, MAX_TEXT_BYTES
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import (
    ERRORS_DOC,
    BoundedViolations,
    EchoText,
    RuleViolation,
    Violations,
)


class DecisionPersisted(BaseModel):
    """Published on decisions.persisted.<plan_id> after the decision is committed."""

    model_config = ConfigDict(frozen=True)

    decision_id: str = Field(description="The recorded decision.")
    plan_id: str = Field(description="Its plan.")
    sequence_number: int = Field(description="Order within the plan, assigned by the recorder.")
    decision_type: DecisionType = Field(description="Its type.")
    parent_decision_id: str | None = Field(description="Its parent; None for the root.")
    hold: str | None = Field(default=None, description=(
        "Set when the invariants' gate recorded the decision held: `awaiting_approval` (a "
        "checked invariant with consequence hold, or a judge that failed) or "
        "`awaiting_judge` (word-only invariants, a judge configured). The agent must not "
        "act on a held decision (docs/invariants.md). Absent: not held."))


def persisted_body(d: Decision, hold: str | None = None) -> bytes:
    """The DecisionPersisted body announcing a stored decision, whoever stored it (the
    recorder, or a correction's transaction through the outbox); `hold`, the status of
    the hold the gate recorded with it, if any."""
    if d.sequence_number is None:
        raise ValueError(f"decision {d.decision_id} has no sequence_number: not stored yet")
    # Built without validating again: every field comes from a validated Decision (one
    # event per recorded decision, so this is on the recorder's hot path).
    event = DecisionPersisted.model_construct(
        decision_id=d.decision_id, plan_id=d.plan_id, sequence_number=d.sequence_number,
        decision_type=d.decision_type, parent_decision_id=d.parent_decision_id, hold=hold)
    # A decision that is not held is announced exactly as before the gate existed.
    return event.model_dump_json(exclude={"hold"} if hold is None else None).encode()


class DecisionRejected(BaseModel):
    """Published on decisions.rejected.<plan_id|unknown> when a message is dead-lettered."""

    model_config = ConfigDict(frozen=True)

    dead_letter_id: EchoText = Field(
        description="ID of the dead_letters document that keeps it.")
    subject: EchoText = Field(description="Subject the message was published on (cut at "
                              f"{MAX_TEXT_BYTES} bytes).")
    plan_id: EchoText | None = Field(description="Its plan, when it could be read.")
    decision_id: EchoText | None = Field(description="Its decision_id, when it could be read.")
    errors: BoundedViolations = Field(description=ERRORS_DOC)
    rejected_at: datetime = Field(description="When the recorder rejected it.")
    resume: Resume | None = Field(
        default=None, description="Set when a correction made the decision stale "
        "(parent_superseded, plan_rolled_back): the correction and the decision to resume "
        "under.")


def read_persisted_root(data: bytes, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
                        ) -> DecisionPersisted | RuleViolation | None:
    """What the reconciler needs from a `decisions.began.*` body (a root's persisted
    body): the event when it announces a plan root, None for any other decision, or why
    it cannot be read (someone else's message on the subject: nothing to reconcile in
    it). Never raises."""
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return big
    try:
        body = json_object(data, "a DecisionPersisted")
        if isinstance(body, RuleViolation):
            return body
        # Cheap check first: a body that is no root is not validated.
        if body.get("decision_type") != DecisionType.PROMPT_DEFINITION.value:
            return None
        return DecisionPersisted.model_validate(body)
    except ValidationError as exc:
        found = Violations(limit=1)
        found.add_validation_error(exc)
        return found.result()[0]
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return unreadable(exc, "a DecisionPersisted")
