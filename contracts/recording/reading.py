"""The recording path's pure rules: read one inbound message, then triage a batch.

The recorder worker pulls a batch, calls `read_message` on each message, asks the
store for the few facts the tree rules need (which IDs exist, their plans, the
plans' roots) and calls `triage_batch`. Everything here is deterministic and free of
I/O, so every rule is tested without a server.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.decisions.model import Decision, DecisionType
from contracts.decisions.subjects import plan_of_subject
from contracts.invariants.model import ReconciliationBlocked, check_not_blocked
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES, MAX_TEXT_BYTES
from contracts.shared.ids import MSG_ID_HEADER, is_ulid
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import (
    ERRORS_DOC,
    BoundedViolations,
    EchoText,
    Rule,
    RuleViolation,
    Violations,
)


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message as it came off the stream."""

    subject: str
    headers: Mapping[str, str]
    data: bytes
    stream_sequence: int
    delivered: int = 1


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message that passed the single-message rules."""

    stream_sequence: int
    decision: Decision
    content_hash: str


@dataclass(frozen=True, slots=True)
class Invalid:
    stream_sequence: int
    plan_id: str | None
    violations: tuple[RuleViolation, ...]


def content_hash(decision: Decision) -> str:
    """What identifies a decision's content: every field but created_at and the
    recorder-assigned ones, so a publisher retry stamped at a later time is still the
    same decision, while a different choice under a reused ID is a conflict."""
    # parent_plan_id came later (issue 8): left out while unset, so a decision stored
    # before it existed still hashes the same when redelivered.
    skip = {"created_at", "sequence_number"}
    if decision.parent_plan_id is None:
        skip.add("parent_plan_id")
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
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Candidate | Invalid:
    """Apply every rule that needs only this message. Never raises: whatever the body
    makes reading throw is reported as that message's `unreadable` violation, and a body
    over `max_payload_bytes` is refused before anything parses it."""
    big = too_large(msg.data, max_payload_bytes)
    if big is not None:
        return Invalid(msg.stream_sequence, _subject_plan(msg.subject), (big,))
    try:
        return _read(msg, received_at)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Invalid(msg.stream_sequence, _subject_plan(msg.subject),
                       (unreadable(exc, "a Decision"),))


def _read(msg: Inbound, received_at: datetime) -> Candidate | Invalid:
    try:
        # Fast path: pydantic parses and validates the bytes in one pass.
        decision = Decision.model_validate_json(msg.data)
    except ValidationError as exc:
        return _explain_invalid(msg, received_at, exc)
    if "created_at" not in decision.model_fields_set:
        decision = decision.model_copy(update={"created_at": received_at})
    owned = {"sequence_number": decision.sequence_number,
             "superseded_by": decision.superseded_by,
             "superseded_at": decision.superseded_at,
             "superseded_by_correction": decision.superseded_by_correction,
             "corrects_decision_id": decision.corrects_decision_id,
             "is_correction": decision.is_correction}
    wire = _wire_violations(owned, msg, decision)
    if wire:
        return Invalid(msg.stream_sequence, decision.plan_id, tuple(wire))
    return Candidate(msg.stream_sequence, decision, content_hash(decision))


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
    return Candidate(msg.stream_sequence, decision, content_hash(decision))


def _parse_failure(error: ValidationError) -> bool:
    """pydantic could not parse the JSON at all (Python's parser may still: its nesting
    limit is higher), so its errors say nothing about the fields."""
    return error.error_count() == 1 and error.errors(include_url=False)[0]["type"] == "json_invalid"


@dataclass(frozen=True, slots=True)
class Stored:
    """What the store holds for a decision_id the batch names."""

    content_hash: str
    recorded_from: int  # stream sequence of the message that wrote it


class Resume(BaseModel):
    """Where an agent whose decision a correction made stale goes on: the correction that
    removed its parent (or its plan) and the decision that replaced what was removed."""

    model_config = ConfigDict(frozen=True)

    correction_id: EchoText | None = Field(
        default=None, description="The correction that superseded the parent or rolled the "
        "plan back; None if the store no longer names it.")
    replacement_decision_id: EchoText | None = Field(
        default=None, description="The decision that replaced the removed subtree: record "
        "new children under it.")
    plan_id: EchoText | None = Field(
        default=None, description="The plan of the replacement decision (for a rolled-back "
        "child plan, its parent plan).")

    def where(self) -> str:
        """The sentence's tail naming both, for the violation message."""
        by = f" by correction {self.correction_id}" if self.correction_id else ""
        plan = f" (plan {self.plan_id})" if self.plan_id else ""
        then = (f"; resume under decision {self.replacement_decision_id}{plan}"
                if self.replacement_decision_id else "")
        return f"{by}{then}"


@dataclass(frozen=True, slots=True)
class PlanClaim:
    """What the plans collection says of a plan a batch claims or records into."""

    parent_plan_id: str | None = None
    spawned_from_decision_id: str | None = None
    spawned_at: datetime | None = None          # created_at of the claiming decision
    named_parent_plan_id: str | None = None     # what its root says (Decision.parent_plan_id)
    began_at: datetime | None = None            # created_at of its root, once recorded


@dataclass(frozen=True, slots=True)
class StoredFacts:
    """What the store knows that the tree rules need, fetched once per batch."""

    existing: Mapping[str, Stored]       # for the decision_ids in the batch
    plan_of: Mapping[str, str]           # decision_id -> plan_id, for stored parents
    root_of_plan: Mapping[str, str]      # plan_id -> root decision_id, for the batch's roots' plans
    # plan_id -> its unresolved blocking violations, for blocked plans in the batch
    blocked_plans: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # plan_id -> its ancestor plans, parent first, for plans in the batch with a parent:
    # a parent's blocking violation blocks its child plans too
    blocking_ancestors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # stored parent decision_id -> where to resume, for parents a revert superseded
    superseded: Mapping[str, Resume] = field(default_factory=dict)
    # plan_id -> where to resume, for plans of the batch a revert rolled back
    rolled_back: Mapping[str, Resume] = field(default_factory=dict)
    # plan_id -> its correction epoch when these facts were read (absent: 0). The
    # recorder's transaction compares it with the counter document it writes, so a revert
    # that committed after the facts were read sends the batch to be triaged again.
    epochs: Mapping[str, int] = field(default_factory=dict)
    # plan_id -> its claim record, for the batch's plans and the plans it claims
    claims: Mapping[str, PlanClaim] = field(default_factory=dict)
    # plan_id -> its ancestor plans by recorded parents, for the batch's claiming plans
    plan_ancestors: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # decision_id -> plan_id, for stored decisions the batch names as dependents
    dependent_plan: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchTriage:
    """What to do with each message of a batch. `accept` is in write order: a parent
    always comes before its children, so sequence numbers follow the tree.

    Of the messages already stored with the same content, `redelivered` are the very
    message that wrote the decision (a worker died before acking it: its persisted
    event may not have gone out, so it is published again under the same Nats-Msg-Id,
    which JetStream drops if it had it), and `duplicate` are other messages with the
    same decision (a publisher's retry): for them nothing is written or published."""

    accept: list[Candidate] = field(default_factory=list)
    redelivered: list[Candidate] = field(default_factory=list)
    duplicate: list[Candidate] = field(default_factory=list)
    reject: list[tuple[Candidate, tuple[RuleViolation, ...]]] = field(default_factory=list)
    wait: list[Candidate] = field(default_factory=list)
    resume: dict[int, Resume] = field(default_factory=dict)
    """By stream sequence: where a decision refused by a correction's rule should go."""


def triage_batch(candidates: Sequence[Candidate], facts: StoredFacts) -> BatchTriage:
    """Decide every candidate of a batch against what is stored and what is beside it."""
    triage = BatchTriage()
    fresh = _sort_out_known(candidates, facts, triage)
    # Accept in dependency order: a child whose parent is in the batch waits for the
    # parent's verdict; stop when a pass decides nothing more.
    tree = _TreeState(dict(facts.plan_of), dict(facts.root_of_plan), facts.blocked_plans,
                      facts.superseded, facts.rolled_back, claims=dict(facts.claims),
                      ancestors=facts.plan_ancestors, dependent_plan=facts.dependent_plan,
                      blocking_ancestors=facts.blocking_ancestors)
    pending = fresh
    while pending:
        undecided = [c for c in pending if not tree.decide(c, triage)]
        if len(undecided) == len(pending):
            break
        pending = undecided
    triage.wait.extend(pending)
    return triage


def _sort_out_known(candidates: Sequence[Candidate], facts: StoredFacts,
                    triage: BatchTriage) -> list[Candidate]:
    """Put redeliveries, retries and conflicts aside; return the decisions new to the store."""
    seen: dict[str, Candidate] = {}
    fresh: list[Candidate] = []
    for c in candidates:
        d = c.decision
        stored = facts.existing.get(d.decision_id)
        twin = seen.get(d.decision_id)
        known = stored.content_hash if stored else (twin.content_hash if twin else None)
        if known is None:
            seen[d.decision_id] = c
            fresh.append(c)
        elif known != c.content_hash:
            triage.reject.append((c, (RuleViolation(
                rule=Rule.DECISION_ID_CONFLICT, field="decision_id",
                message=f"decision {d.decision_id} is already recorded with different content; "
                "a new choice needs a new decision_id"),)))
        elif stored and stored.recorded_from == c.stream_sequence:
            triage.redelivered.append(c)
        else:
            triage.duplicate.append(c)
    return fresh


@dataclass
class _TreeState:
    """The tree as the batch is decided: stored facts plus what the batch accepted."""

    plan_of: dict[str, str]
    roots: dict[str, str]
    blocked: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    superseded: Mapping[str, Resume] = field(default_factory=dict)
    rolled_back: Mapping[str, Resume] = field(default_factory=dict)
    rejected: set[str] = field(default_factory=set)
    stale: dict[str, Resume] = field(default_factory=dict)
    """Decisions of the batch refused as stale: their children are stale too."""
    claims: dict[str, PlanClaim] = field(default_factory=dict)
    ancestors: Mapping[str, frozenset[str]] = field(default_factory=dict)
    dependent_plan: Mapping[str, str] = field(default_factory=dict)
    blocking_ancestors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def decide(self, c: Candidate, triage: BatchTriage) -> bool:
        """Accept or reject `c`, or return False if its parent is still undecided."""
        d = c.decision
        stale = self._stale(d)
        if stale is not None:
            violation, resume = stale
            self.rejected.add(d.decision_id)
            self.stale[d.decision_id] = resume
            triage.reject.append((c, (violation,)))
            triage.resume[c.stream_sequence] = resume
            return True
        broken = self._broken_rule(d)
        if broken is None and d.parent_decision_id is not None \
                and d.parent_decision_id not in self.plan_of:
            return False
        if broken is None:
            broken = self._family_rule(d)
        if broken is None:
            self.plan_of[d.decision_id] = d.plan_id
            if d.is_root:
                self.roots[d.plan_id] = d.decision_id
            self._note_family(d)
            triage.accept.append(c)
        else:
            self.rejected.add(d.decision_id)
            triage.reject.append((c, (broken,)))
        return True

    def _stale(self, d: Decision) -> tuple[RuleViolation, Resume] | None:
        """A decision a correction already made stale: its plan was rolled back, or its
        parent superseded. Checked first, since it tells the agent where to go on."""
        resume = self.rolled_back.get(d.plan_id)
        if resume is not None:
            return RuleViolation(
                rule=Rule.PLAN_ROLLED_BACK, field="plan_id",
                message=f"plan {d.plan_id} was rolled back{resume.where()}"), resume
        parent = d.parent_decision_id
        resume = self.superseded.get(parent) if parent is not None else None
        if resume is not None:
            return RuleViolation(
                rule=Rule.PARENT_SUPERSEDED, field="parent_decision_id",
                message=f"parent {parent} was superseded{resume.where()}"), resume
        resume = self.stale.get(parent) if parent is not None else None
        if resume is not None:
            return RuleViolation(
                rule=Rule.PARENT_SUPERSEDED, field="parent_decision_id",
                message=f"parent {parent} was refused in the same batch: its branch was "
                f"superseded{resume.where()}"), resume
        return None

    def _family_rule(self, d: Decision) -> RuleViolation | None:
        """Issue 8: claims of child plans and declared dependents stay in the family.
        Only what is provably wrong now is refused (a dependent not recorded yet is
        allowed); the impact walk enforces the family whatever was recorded."""
        if d.is_root:
            broken = self._root_claim(d)
            if broken is not None:
                return broken
        for p in d.downstream_plan_ids:
            broken = self._claim(d, p)
            if broken is not None:
                return broken
        for x in d.downstream_decision_ids:
            broken = self._dependent(d, x)
            if broken is not None:
                return broken
        return None

    def _root_claim(self, d: Decision) -> RuleViolation | None:
        link = self.claims.get(d.plan_id, PlanClaim())
        if d.parent_plan_id is not None and link.parent_plan_id not in (None, d.parent_plan_id):
            return _claim_violation("parent_plan_id", f"plan {d.plan_id} was spawned from plan "
                                    f"{link.parent_plan_id}, not {d.parent_plan_id}")
        if link.spawned_at is not None and d.created_at < link.spawned_at:
            return _claim_violation(
                "created_at", f"plan {d.plan_id} was spawned by decision "
                f"{link.spawned_from_decision_id} at {link.spawned_at.isoformat()}; its root "
                "cannot have been created before that")
        return None

    def _claim(self, d: Decision, p: str) -> RuleViolation | None:
        if p == d.plan_id:
            return _claim_violation("downstream_plan_ids", f"plan {p} cannot spawn itself")
        if p in self.ancestors.get(d.plan_id, frozenset()):
            return _claim_violation("downstream_plan_ids",
                                    f"plan {p} is an ancestor of plan {d.plan_id}")
        link = self.claims.get(p, PlanClaim())
        if link.parent_plan_id is not None and (
                link.parent_plan_id != d.plan_id
                or link.spawned_from_decision_id not in (None, d.decision_id)):
            return _claim_violation(
                "downstream_plan_ids", f"plan {p} was already spawned by decision "
                f"{link.spawned_from_decision_id} of plan {link.parent_plan_id}")
        if link.named_parent_plan_id not in (None, d.plan_id):
            return _claim_violation("downstream_plan_ids", f"the root of plan {p} names plan "
                                    f"{link.named_parent_plan_id} as its parent")
        if link.began_at is not None and link.began_at < d.created_at:
            return _claim_violation(
                "downstream_plan_ids", f"plan {p} began on its own at "
                f"{link.began_at.isoformat()}, before this decision")
        return None

    def _dependent(self, d: Decision, x: str) -> RuleViolation | None:
        if x in (d.decision_id, d.parent_decision_id):
            return RuleViolation(
                rule=Rule.DOWNSTREAM_IN_FAMILY, field="downstream_decision_ids",
                message=f"{x} is this decision or its parent, not a dependent")
        plan_id = self.plan_of.get(x) or self.dependent_plan.get(x)
        if plan_id is None or plan_id == d.plan_id:
            return None
        child = self.claims.get(plan_id, PlanClaim()).parent_plan_id == d.plan_id
        if child or plan_id in d.downstream_plan_ids:
            return None
        return RuleViolation(
            rule=Rule.DOWNSTREAM_IN_FAMILY, field="downstream_decision_ids",
            message=f"decision {x} belongs to plan {plan_id}, which is neither plan "
            f"{d.plan_id} nor one of its child plans")

    def _note_family(self, d: Decision) -> None:
        """What an accepted decision claims counts for the rest of the batch."""
        if d.is_root:
            old = self.claims.get(d.plan_id, PlanClaim())
            self.claims[d.plan_id] = PlanClaim(
                old.parent_plan_id, old.spawned_from_decision_id, old.spawned_at,
                d.parent_plan_id or old.named_parent_plan_id, d.created_at)
        for p in d.downstream_plan_ids:
            old = self.claims.get(p, PlanClaim())
            self.claims[p] = PlanClaim(d.plan_id, d.decision_id, d.created_at,
                                       old.named_parent_plan_id, old.began_at)

    def _broken_rule(self, d: Decision) -> RuleViolation | None:
        try:
            check_not_blocked(d.plan_id, d.decision_type, self.blocked,
                              self.blocking_ancestors.get(d.plan_id, ()))
        except ReconciliationBlocked as exc:
            return RuleViolation(rule=Rule.RECONCILIATION_BLOCKED, field="decision_type",
                                 message=str(exc))
        if d.is_root:
            root = self.roots.get(d.plan_id)
            if root is not None and root != d.decision_id:
                return RuleViolation(
                    rule=Rule.ONE_ROOT_PER_PLAN, field="decision_type",
                    message=f"plan {d.plan_id} already has the root {root}; "
                    "a plan has one prompt_definition")
            return None
        parent = d.parent_decision_id
        if parent in self.rejected:
            return RuleViolation(
                rule=Rule.PARENT_EXISTS, field="parent_decision_id",
                message=f"parent {parent} was rejected in the same batch")
        if parent in self.plan_of and self.plan_of[parent] != d.plan_id:
            return RuleViolation(
                rule=Rule.PARENT_IN_SAME_PLAN, field="parent_decision_id",
                message=f"parent {parent} belongs to plan {self.plan_of[parent]}, "
                f"not {d.plan_id}")
        return None


def _claim_violation(field_name: str, message: str) -> RuleViolation:
    return RuleViolation(rule=Rule.CHILD_PLAN_CLAIM, field=field_name, message=message)


class DecisionPersisted(BaseModel):
    """Published on decisions.persisted.<plan_id> after the decision is committed."""

    model_config = ConfigDict(frozen=True)

    decision_id: str = Field(description="The recorded decision.")
    plan_id: str = Field(description="Its plan.")
    sequence_number: int = Field(description="Order within the plan, assigned by the recorder.")
    decision_type: DecisionType = Field(description="Its type.")
    parent_decision_id: str | None = Field(description="Its parent; None for the root.")


def persisted_body(d: Decision) -> bytes:
    """The DecisionPersisted body announcing a stored decision, whoever stored it (the
    recorder, or a correction's transaction through the outbox)."""
    if d.sequence_number is None:
        raise ValueError(f"decision {d.decision_id} has no sequence_number: not stored yet")
    # Built without validating again: every field comes from a validated Decision (one
    # event per recorded decision, so this is on the recorder's hot path).
    return DecisionPersisted.model_construct(
        decision_id=d.decision_id, plan_id=d.plan_id, sequence_number=d.sequence_number,
        decision_type=d.decision_type, parent_decision_id=d.parent_decision_id,
    ).model_dump_json().encode()


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
    """What the reconciler needs from a `decisions.persisted.*` body: the event when it
    announces a plan root, None for any other decision, or why it cannot be read (someone
    else's message on the subject: nothing to reconcile in it). Never raises."""
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return big
    try:
        body = json_object(data, "a DecisionPersisted")
        if isinstance(body, RuleViolation):
            return body
        # Cheap check first: nearly every persisted event is not a root.
        if body.get("decision_type") != DecisionType.PROMPT_DEFINITION.value:
            return None
        return DecisionPersisted.model_validate(body)
    except ValidationError as exc:
        found = Violations(limit=1)
        found.add_validation_error(exc)
        return found.result()[0]
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return unreadable(exc, "a DecisionPersisted")
