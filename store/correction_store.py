"""Everything the correction service needs from MongoDB, opened together."""

from __future__ import annotations

from dataclasses import dataclass

from pymongo.asynchronous.database import AsyncDatabase

from store.attempts import CorrectionAttemptRepository
from store.correction_writes import CorrectionWriter
from store.corrections import CorrectionRepository
from store.database import Document
from store.dead_letters import DeadLetterRepository
from store.decisions import DecisionRepository
from store.impact import ImpactReader
from store.leases import Leases
from store.outbox import OutboxRepository
from store.plans import PlanRepository


@dataclass(frozen=True)
class CorrectionStore:
    decisions: DecisionRepository
    corrections: CorrectionRepository
    attempts: CorrectionAttemptRepository
    plans: PlanRepository
    outbox: OutboxRepository
    leases: Leases
    impact: ImpactReader
    writer: CorrectionWriter
    dead_letters: DeadLetterRepository

    @classmethod
    def open(cls, db: AsyncDatabase[Document], lease_seconds: float = 10.0) -> CorrectionStore:
        leases = Leases(db, lease_seconds)
        return cls(
            decisions=DecisionRepository(db), corrections=CorrectionRepository(db),
            attempts=CorrectionAttemptRepository(db), plans=PlanRepository(db),
            outbox=OutboxRepository(db), leases=leases, impact=ImpactReader(db),
            writer=CorrectionWriter(db, leases), dead_letters=DeadLetterRepository(db),
        )
