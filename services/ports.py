"""What the services need from the outside world, as protocols: the store and the publisher.

The ports belong to the services that use them, so each says exactly what they call and
no more. Workers wire in the MongoDB implementations (store/: `CorrectionStore`,
`InvariantStore`, the repositories) and a JetStream publisher; the tests also run the
services over the in-memory store (tests/memory_store.py), and one contract suite
(tests/contract/) holds both stores to the same rules.

Errors are part of the contract: a conditional write that finds the record changed
raises `store.errors.ConcurrentChange` (`LeaseLost` when the plan's lease is gone),
a unique key already taken `DuplicateRecord`, and a database that fails or does not
answer `StoreFailure`; a message no stream stored raises `NotStored` (below); the
services never see a driver's exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import Changes, Versioned, Written
from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord, PlanStatus
from contracts.impact.summary import CorrectionImpact
from contracts.impact.walk import ImpactWalk
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.violations import InvariantViolation
from contracts.recording.facts import StoredFacts
from contracts.recording.message import Candidate
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.outgoing import OutgoingEvent, Pending, StreamAck

__all__ = [
    "AttemptRecords", "CorrectionCommits", "CorrectionObserver", "CorrectionRecords",
    "CorrectionStorePort", "DeadLetterRecords", "DeadLetterShelf", "DecisionRecords",
    "EventFor", "EventPublisher", "ImpactReads", "InvariantRecords", "InvariantStorePort",
    "MessagePublisher", "NotStored", "OutboxRecords", "OutgoingEvent", "PlanLeases",
    "PlanRecords", "RecordedDecisions", "StreamAck", "ViolationRecords",
]


class EventPublisher(Protocol):
    async def publish_all(self, events: Sequence[OutgoingEvent]) -> None:
        """Publish every event with its Nats-Msg-Id and return once each is stored
        (acknowledged by JetStream); raise if any was not."""
        ...


class NotStored(Exception):
    """No stream stored the message: none takes its subject, the stream refused it, or
    no answer came in time (then it may have been stored all the same; its Nats-Msg-Id
    makes sending it again safe)."""


class MessagePublisher(Protocol):
    """One message published exactly as given, and the stream's answer returned: for
    republishing a message as it was first sent (a dead letter's retry), where the
    caller must know whether JetStream stored it or dropped it as a duplicate."""

    async def publish_message(self, subject: str, payload: bytes,
                              headers: Mapping[str, str]) -> StreamAck:
        """Headers unchanged (a Nats-Msg-Id among them is JetStream's to deduplicate
        on); NotStored when no stream stored it."""
        ...


class CorrectionObserver(Protocol):
    """Told once per correction that ends (the worker counts it in its metrics)."""

    def correction_ended(self, mode: str, outcome: str, seconds: float) -> None:
        """`outcome` is applied, failed or cancelled; `seconds` from request to end."""
        ...


# --- decisions and plans ---------------------------------------------------------------


class DecisionRecords(Protocol):
    """Reads of stored decisions (the correction and invariant services)."""

    async def get(self, decision_id: str) -> Decision | None: ...

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]: ...

    async def roots_of(self, plan_ids: Iterable[str]) -> dict[str, Decision]:
        """plan_id -> its root prompt_definition (not a correction), for those recorded."""
        ...

    async def roots_page(self, after: str | None, limit: int) -> list[Decision]:
        """Plan roots in decision ID order, the `limit` after `after`."""
        ...


class RecordedDecisions(Protocol):
    """The recorder's batch: the facts a batch is triaged against, and its one write."""

    async def facts_for(self, candidates: Sequence[Candidate], *,
                        existing: bool = True) -> StoredFacts: ...

    async def insert_recorded(self, accepted: Sequence[Candidate], now: datetime,
                              epochs: Mapping[str, int] | None = None
                              ) -> list[Decision] | None:
        """Number and insert, all or nothing; None when a concurrent writer or a
        correction got there first (the caller triages again)."""
        ...

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]: ...


class PlanRecords(Protocol):
    async def get(self, plan_id: str) -> PlanRecord | None: ...

    async def ancestors(self, plan_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """plan_id -> its ancestors, parent first, for the plans that have a parent."""
        ...

    async def statuses(self, plan_ids: Iterable[str]) -> dict[str, PlanStatus]: ...


class ImpactReads(Protocol):
    async def walk(self, target_decision_id: str, limit: int | None = None) -> ImpactWalk:
        """The finished BFS walk; past `limit` decisions it stops (`exceeded`)."""
        ...

    async def impact(self, target_decision_id: str, limit: int | None = None
                     ) -> CorrectionImpact:
        """TargetNotFound if the target does not exist; `exceeds_limit` past `limit`."""
        ...


# --- corrections -----------------------------------------------------------------------


class CorrectionRecords(Protocol):
    async def get(self, correction_id: str) -> Versioned | None: ...

    async def find(self, plan_id: str | None = None, status: CorrectionStatus | None = None,
                   limit: int = 100) -> list[Correction]:
        """In arrival order."""
        ...

    async def plans_with_unfinished(self, limit: int = 1000) -> list[str]: ...

    async def unfinished(self, plan_id: str) -> list[Versioned]:
        """Not yet APPLIED, FAILED or CANCELLED, oldest arrival first."""
        ...


class AttemptRecords(Protocol):
    async def list_by_correction(self, correction_id: str
                                 ) -> list[CorrectionAttemptRecord]:
        """Oldest first."""
        ...


class CorrectionCommits(Protocol):
    async def commit(self, changes: Changes, now: datetime) -> Written:
        """Everything `changes` says, in one transaction, or nothing: ConcurrentChange
        if the correction (or an attempt, or the tree) changed since it was read,
        LeaseLost if `lease_owner` no longer holds the plan, DuplicateRecord if a new
        correction's ID is taken."""
        ...


class PlanLeases(Protocol):
    """One driver at a time per plan: a lease that expires unless renewed."""

    @property
    def ttl(self) -> timedelta: ...

    async def acquire(self, plan_id: str, owner: str, now: datetime) -> bool:
        """True if `owner` now holds it (it was free, expired, or already theirs)."""
        ...

    async def renew(self, plan_id: str, owner: str, now: datetime) -> bool:
        """False once the lease is no longer `owner`'s."""
        ...

    async def release(self, plan_id: str, owner: str) -> None: ...

    async def live(self, plan_ids: list[str], now: datetime) -> set[str]:
        """Which of these plans have a lease that has not expired."""
        ...


class OutboxRecords(Protocol):
    async def pending_for(self, correction_id: str) -> list[Pending]:
        """The key's pending events, in order."""
        ...

    async def pending(self, created_before: datetime | None = None,
                      limit: int = 1000) -> list[Pending]: ...

    async def delete(self, msg_ids: Sequence[str]) -> None: ...


class DeadLetterRecords(Protocol):
    async def keep(self, letters: Sequence[DeadLetter]) -> None:
        """Insert all; one already kept (a redelivery) is left as it was."""
        ...


class DeadLetterShelf(Protocol):
    """The kept dead letters, for retrying one (services.dead_letters)."""

    async def get(self, dead_letter_id: str) -> DeadLetter | None: ...

    async def delete(self, dead_letter_id: str) -> bool:
        """False when it was already gone."""
        ...


class CorrectionStorePort(Protocol):
    """Everything the correction service reads and writes (store.correction_store)."""

    @property
    def decisions(self) -> DecisionRecords: ...
    @property
    def corrections(self) -> CorrectionRecords: ...
    @property
    def attempts(self) -> AttemptRecords: ...
    @property
    def plans(self) -> PlanRecords: ...
    @property
    def outbox(self) -> OutboxRecords: ...
    @property
    def locks(self) -> PlanLeases: ...
    @property
    def impact(self) -> ImpactReads: ...
    @property
    def writer(self) -> CorrectionCommits: ...
    @property
    def dead_letters(self) -> DeadLetterRecords: ...


# --- invariants ------------------------------------------------------------------------


EventFor = Callable[[InvariantViolation, bool], OutgoingEvent]
"""Builds the event of a violation change from the violation as stored and whether its
plan is blocked once the change commits (known only inside the transaction)."""


class InvariantRecords(Protocol):
    async def add(self, inv: Invariant) -> None:
        """DuplicateInvariant if one of that name exists at that scope and target."""
        ...

    async def get(self, invariant_id: str) -> Invariant | None: ...

    async def require(self, invariant_id: str) -> Invariant:
        """InvariantNotFound for an unknown ID."""
        ...

    async def find(self, scope: InvariantScope | None = None,
                   scope_target: str | None = None) -> list[Invariant]: ...

    async def remove(self, invariant_id: str) -> Invariant: ...

    async def inputs_for(self, plan_ids: Iterable[str] = (), projects: Iterable[str] = (),
                         action_templates: Iterable[str] = ()) -> list[Invariant]: ...


class ViolationRecords(Protocol):
    async def get(self, violation_id: str) -> InvariantViolation | None: ...

    async def require(self, violation_id: str) -> InvariantViolation: ...

    async def find(self, plan_id: str | None = None, *, unresolved_only: bool = False,
                   limit: int = 1000) -> list[InvariantViolation]: ...

    async def blocked_plans(self, plan_ids: Iterable[str]) -> set[str]: ...

    async def record(self, v: InvariantViolation, event_for: EventFor, now: datetime) -> bool:
        """Store a report with its event, in one transaction; False if this very report
        was stored before; ViolationConflict if its ID holds other content."""
        ...

    async def resolve(self, violation_id: str, resolved_by: str, at: datetime,
                      event_for: EventFor) -> InvariantViolation:
        """Resolved with its event, in one transaction; ViolationAlreadyResolved if it
        was resolved before."""
        ...


class InvariantStorePort(Protocol):
    """Everything the invariant service reads and writes (store.invariant_store)."""

    @property
    def invariants(self) -> InvariantRecords: ...
    @property
    def violations(self) -> ViolationRecords: ...
    @property
    def decisions(self) -> DecisionRecords: ...
    @property
    def plans(self) -> PlanRecords: ...
    @property
    def outbox(self) -> OutboxRecords: ...
    @property
    def dead_letters(self) -> DeadLetterRecords: ...
