"""What one correction step writes, as a value: the services build it, the store commits it.

`Changes` says everything a step writes: the correction's new state (conditional on
the version it was read at), attempt changes (conditional on their previous state),
the tree changes of a revert or an append, and the events announcing all of it,
which go to the outbox in the same transaction. It lives here, beside the other pure
correction values, so that the service depends on a description and every store (the
MongoDB one in store/correction_writes.py, the in-memory one the tests use) carries
it out the same way: all of it or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contracts.corrections.append import AppendWrites
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.record import Correction
from contracts.corrections.revert import RevertWrites
from contracts.corrections.states import CorrectionAttemptState
from contracts.decisions.model import Decision
from contracts.shared.outgoing import OutgoingEvent

__all__ = ["AttemptChange", "Changes", "Versioned", "Written"]


@dataclass(frozen=True, slots=True)
class Versioned:
    """A correction as read, with what a conditional write needs to go after it."""

    correction: Correction
    version: int
    arrival: int


@dataclass(frozen=True)
class AttemptChange:
    attempt: CorrectionAttemptRecord
    expected: CorrectionAttemptState | None
    """State it must still be in; None to insert it."""


@dataclass(frozen=True)
class Changes:
    correction: Correction
    expected_version: int | None
    """Version it was read at; None to insert it (a new PENDING correction)."""
    arrival: int = 0
    attempts: Sequence[AttemptChange] = ()
    revert: RevertWrites | None = None
    append: AppendWrites | None = None
    events: Sequence[OutgoingEvent] = ()
    lease_owner: str | None = None
    """When set, the transaction renews and requires this owner's lease on the plan."""
    announce: Callable[[Decision], Sequence[OutgoingEvent]] | None = None
    """Builds the events announcing each decision the step writes (decisions.persisted,
    and decisions.began for a root), once its sequence number is known inside the
    transaction; outboxed with the rest."""


@dataclass(frozen=True)
class Written:
    versioned: Versioned
    new_decisions: list[Decision] = field(default_factory=list)
