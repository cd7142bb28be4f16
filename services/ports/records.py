"""The records more than one service reads or writes: decisions, plans, the impact walk,
the transactional outbox and the dead letters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.impact.summary import CorrectionImpact
from contracts.impact.walk import ImpactWalk
from contracts.invariants.outcomes import GateEffects
from contracts.recording.facts import StoredFacts
from contracts.recording.message import Candidate
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.outgoing import Pending
from contracts.shared.persistence import LeaseFence
from contracts.trust.ownership import Ownership


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
                              epochs: Mapping[str, int] | None = None,
                              ownership: Mapping[str, Ownership] | None = None,
                              effects: GateEffects | None = None, *,
                              fence: LeaseFence | None = None) -> list[Decision] | None:
        """Number and insert, with the invariants' gate's `effects`, all or nothing; None
        when a concurrent writer or a correction got there first (the caller triages
        again); LeaseLost, nothing written, when `fence`'s lease is no longer its
        owner's (another replica records the partition now)."""
        ...

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]: ...

    def lay_out(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates with what `insert_recorded` would compute of each before it
        knows its sequence number done now (Candidate.laid): CPU only, so the worker does
        it while the batch before is written. Optional to call; the same records result."""
        ...


class PlanRecords(Protocol):
    async def get(self, plan_id: str) -> PlanRecord | None: ...

    async def owner(self, plan_id: str) -> str | None:
        """The principal whose signed root started the plan (None: none verified)."""
        ...

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

    async def sequence_mark(self, plan_id: str) -> int:
        """The plan's next sequence number (0 for a plan not recorded). Every decision
        recorded into the plan moves it, in the recording's transaction; read before a
        walk, it tells a revert whether anything was recorded into the plan since."""
        ...


class OutboxRecords(Protocol):
    async def pending_for(self, source_id: str) -> list[Pending]:
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
