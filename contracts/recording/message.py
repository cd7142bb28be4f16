"""Reading one inbound decision message: every rule that needs only the message.

The recorder calls `read_message` on each message of a batch before it asks the store
anything; a message that breaks a rule here never costs a query. Deterministic and free
of I/O, so every rule is tested without a server.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from contracts.decisions.model import Decision
from contracts.decisions.subjects import plan_of_subject
from contracts.redaction.text import Mark
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.ids import MSG_ID_HEADER, is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.trust.policy import Identity

LATER_FIELDS = ("parent_plan_id", "delegates", "agent", "model", "tool")
"""Decision fields added after decisions were first stored."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message that passed the single-message rules."""

    stream_sequence: int
    decision: Decision
    content_hash: str
    identity: Identity = None
    """Who sent it, as verified (workers.inbound): the record's recorded_by."""
    created_at_sent: bool = True
    """False when the recorder filled created_at in (the stream's time): the agent
    claimed no time, so it is not held to its parent's (a child published before its
    parent gets an earlier stream time)."""
    redactions: tuple[Mark, ...] = ()
    """What redaction replaced in its free text (contracts.redaction): the record keeps
    these marks, never the values."""
    laid: Laid | None = None
    """Its record laid out ahead of the write (None: laid out when written)."""


@dataclass(frozen=True, slots=True)
class Laid:
    """A candidate's record as the store will write it, but for its sequence number, and
    the chain's digests of those fields (contracts.trust.chain): the CPU work of the write
    that does not need the plan's counter, done while the batch before is written
    (RecordedDecisions.lay_out). The numbering adds the sequence number's field and
    digest, then the link."""

    document: Mapping[str, Any]
    digests: Mapping[str, str]
    source: tuple[object, ...]
    """What of the candidate it was laid out from (`Laid.fits`)."""

    def fits(self, c: Candidate) -> bool:
        """Whether it was laid out from `c` as it is: a candidate changed since (another
        decision, signer or redaction, even an equal one) is laid out again."""
        return len(self.source) == len(source := laid_from(c)) and all(
            a is b for a, b in zip(self.source, source, strict=True))


def laid_from(c: Candidate) -> tuple[object, ...]:
    """What a candidate's laid-out record is made of."""
    return (c.decision, c.identity, c.redactions, c.content_hash, c.stream_sequence)


@dataclass(frozen=True, slots=True)
class Invalid:
    stream_sequence: int
    plan_id: str | None
    violations: tuple[RuleViolation, ...]


def content_hash(decision: Decision) -> str:
    """What identifies a decision's content: every field but created_at and the
    recorder-assigned ones, so a publisher retry stamped at a later time is still the
    same decision, while a different choice under a reused ID is a conflict."""
    skip = {"created_at", "sequence_number"}
    # Fields added later are left out while unset, so a decision stored before they
    # existed still hashes the same when redelivered.
    skip.update(name for name in LATER_FIELDS if not getattr(decision, name))
    body = decision.model_dump_json(exclude=skip)
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def _subject_plan(subject: str) -> str | None:
    plan = plan_of_subject(subject)
    return plan.upper() if plan and is_ulid(plan) else None


def _plan_hint(data: object, subject: str) -> str | None:
    """Best guess at the plan a bad message concerns, for the rejection subject."""
    if isinstance(data, dict):
        plan = data.get("plan_id")
        if isinstance(plan, str) and is_ulid(plan):
            return plan.upper()
    return _subject_plan(subject)


def read_message(msg: Inbound, received_at: datetime,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
                 max_skew: timedelta | None = None) -> Candidate | Invalid:
    """Apply every rule that needs only this message. Never raises: whatever the body
    makes reading throw is reported as that message's `unreadable` violation, and a body
    over `max_payload_bytes` is refused before anything parses it. A decision without
    created_at gets the stream's time for the message (else `received_at`); one with it
    must lie within `max_skew` of the stream's time (rule created_at_skew), so an agent
    cannot backdate a decision to slip it before another."""
    big = too_large(msg.data, max_payload_bytes)
    if big is not None:
        return Invalid(msg.stream_sequence, _subject_plan(msg.subject), (big,))
    try:
        return _read(msg, msg.stream_time or received_at, max_skew)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Invalid(msg.stream_sequence, _subject_plan(msg.subject),
                       (unreadable(exc, "a Decision"),))


def _skewed(decision: Decision, msg: Inbound, max_skew: timedelta | None
            ) -> RuleViolation | None:
    if max_skew is None or msg.stream_time is None:
        return None
    off = decision.created_at - msg.stream_time
    if abs(off) <= max_skew:
        return None
    return RuleViolation(
        rule=Rule.CREATED_AT_SKEW, field="created_at",
        message=f"created_at {decision.created_at.isoformat()} is {abs(off).total_seconds():.0f}s "
        f"{'after' if off > timedelta(0) else 'before'} the stream's time for the message (at "
        f"most {max_skew.total_seconds():g}s); leave it out to get the stream's time")


def _read(msg: Inbound, received_at: datetime, max_skew: timedelta | None
          ) -> Candidate | Invalid:
    try:
        # Fast path: pydantic parses and validates the bytes in one pass.
        decision = Decision.model_validate_json(msg.data)
    except ValidationError as exc:
        return _explain_invalid(msg, received_at, exc)
    if "created_at" not in decision.model_fields_set:
        decision = decision.model_copy(update={"created_at": received_at})
        wire = _wire_violations(_owned(decision), msg, decision)
        if wire:
            return Invalid(msg.stream_sequence, decision.plan_id, tuple(wire))
        return Candidate(msg.stream_sequence, decision, content_hash(decision),
                         created_at_sent=False)
    if (skewed := _skewed(decision, msg, max_skew)) is not None:
        return Invalid(msg.stream_sequence, decision.plan_id, (skewed,))
    wire = _wire_violations(_owned(decision), msg, decision)
    if wire:
        return Invalid(msg.stream_sequence, decision.plan_id, tuple(wire))
    return Candidate(msg.stream_sequence, decision, content_hash(decision))


def _owned(decision: Decision) -> dict[str, object]:
    """The fields the recorder and the correction workflow set, as sent."""
    return {"sequence_number": decision.sequence_number,
            "superseded_by": decision.superseded_by,
            "superseded_at": decision.superseded_at,
            "superseded_by_correction": decision.superseded_by_correction,
            "corrects_decision_id": decision.corrects_decision_id,
            "is_correction": decision.is_correction}


def _wire_violations(raw: Mapping[str, object], msg: Inbound,
                     decision: Decision | None) -> list[RuleViolation]:
    """The recording path's own rules: fields it owns, and subject and Msg-Id agreement."""
    wire: list[RuleViolation] = []
    if raw.get("sequence_number") is not None:
        wire.append(RuleViolation(
            rule=Rule.SEQUENCE_ASSIGNED_BY_RECORDER, field="sequence_number",
            message="sequence_number is assigned by the recorder; leave it out"))
    for name in ("superseded_by", "superseded_at", "superseded_by_correction",
                 "corrects_decision_id"):
        if raw.get(name) is not None:
            wire.append(RuleViolation(
                rule=Rule.CORRECTIONS_USE_WORKFLOW, field=name,
                message=f"{name} is set only by the correction workflow "
                "(publish a CorrectionRequest to corrections.requested.<plan_id>)"))
    if raw.get("is_correction") is True:
        wire.append(RuleViolation(
            rule=Rule.CORRECTIONS_USE_WORKFLOW, field="is_correction",
            message="corrections are not recorded directly; publish a CorrectionRequest to "
            "corrections.requested.<plan_id>"))
    if decision is None:
        return wire
    subject_plan = plan_of_subject(msg.subject)
    if subject_plan is None or subject_plan.upper() != decision.plan_id:
        wire.append(RuleViolation(
            rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
            message=f"published on {msg.subject!r} but plan_id is {decision.plan_id}; "
            f"publish to decisions.recorded.{decision.plan_id}"))
    msg_id = msg.headers.get(MSG_ID_HEADER)
    if msg_id is None or msg_id.upper() != decision.decision_id:
        wire.append(RuleViolation(
            rule=Rule.MSG_ID_MATCHES_DECISION, field="decision_id",
            message=f"header {MSG_ID_HEADER} must equal decision_id {decision.decision_id} "
            f"(got {msg_id!r}), so a retry is deduplicated"))
    return wire


def _explain_invalid(msg: Inbound, received_at: datetime,
                     fast: ValidationError) -> Candidate | Invalid:
    """The slow path, for a message the fast path refused: say everything that is wrong
    (the first MAX_ERRORS of it; the rest are counted)."""
    raw = json_object(msg.data, "a Decision")
    if isinstance(raw, RuleViolation):
        return Invalid(msg.stream_sequence, _subject_plan(msg.subject), (raw,))
    plan_hint = _plan_hint(raw, msg.subject)
    found = Violations()
    found.extend(_wire_violations(raw, msg, None))
    sent_null = "created_at" in raw and raw["created_at"] is None
    if not _parse_failure(fast) and not (sent_null and fast.error_count() == 1):
        # The fast path judged these very fields (a null created_at stands for the
        # receive time, so its error is not one): its errors are the answer, and a body
        # built to fail 60,000 times is not validated twice.
        found.add_validation_error(fast, ignore={"created_at"} if sent_null else set())
        return Invalid(msg.stream_sequence, plan_hint, found.result())
    if raw.get("created_at") is None:
        raw["created_at"] = received_at
    try:
        decision = Decision.model_validate(raw)
    except ValidationError as exc:
        found.add_validation_error(exc)
        return Invalid(msg.stream_sequence, plan_hint, found.result())
    # Valid once created_at was filled in (it was sent as null): judge it as usual.
    wire = _wire_violations(raw, msg, decision)
    if wire:
        return Invalid(msg.stream_sequence, decision.plan_id, tuple(wire))
    return Candidate(msg.stream_sequence, decision, content_hash(decision),
                     created_at_sent=False)


def _parse_failure(error: ValidationError) -> bool:
    """pydantic could not parse the JSON at all (Python's parser may still: its nesting
    limit is higher), so its errors say nothing about the fields."""
    return error.error_count() == 1 and error.errors(include_url=False)[0]["type"] == "json_invalid"
