"""Everything the invariant service needs from MongoDB, opened together."""

from __future__ import annotations

from dataclasses import dataclass

from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from store.dead_letters import DeadLetterRepository
from store.decisions import DecisionRepository
from store.invariants import InvariantRepository
from store.outbox import OutboxRepository
from store.plans import PlanRepository
from store.violations import ViolationRepository


@dataclass(frozen=True)
class InvariantStore:
    invariants: InvariantRepository
    violations: ViolationRepository
    decisions: DecisionRepository
    plans: PlanRepository
    outbox: OutboxRepository
    dead_letters: DeadLetterRepository

    @classmethod
    def open(cls, db: AsyncDatabase[Document]) -> InvariantStore:
        return cls(invariants=InvariantRepository(db), violations=ViolationRepository(db),
                   decisions=DecisionRepository(db), plans=PlanRepository(db),
                   outbox=OutboxRepository(db), dead_letters=DeadLetterRepository(db))
