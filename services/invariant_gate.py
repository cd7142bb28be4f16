"""The recorder's gate over one batch: read its inputs with the batch's facts, build a
fresh gate for each triage of the batch, turn what it decided into the writes of the
batch's transaction, and announce them once committed.

The triage of a batch may run more than once (a concurrent writer, a correction): the
inputs are read once per batch, and each evaluation is memoised and charged to one
budget (`INVARIANT_EVAL_BUDGET_MS` per decision of the batch), so a batch evaluates
each check on each decision at most once whatever happens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from contracts.invariants.approvals import outbox_key
from contracts.invariants.evaluation import Budget, Evaluation
from contracts.invariants.gate import Gate, GateInputs
from contracts.invariants.holds import HoldStatus
from contracts.invariants.outcomes import GateEffects, found
from contracts.invariants.severity import Severity
from contracts.recording.facts import StoredFacts
from contracts.recording.message import Candidate
from services import outbox
from services.ports.gates import GateInputsSource
from services.ports.publishing import EventPublisher
from services.ports.records import OutboxRecords, RecordedDecisions

DEFAULT_BUDGET_MS = 20.0
"""CPU milliseconds of evaluation per decision of a batch (INVARIANT_EVAL_BUDGET_MS)."""


@dataclass
class BatchGate:
    """One batch's gate: its inputs (read once), budget and memo."""

    service: GateService
    budget: Budget
    memo: dict[tuple[str, str], Evaluation] = field(default_factory=dict)
    loaded: GateInputs | None = None

    async def facts(self, decisions: RecordedDecisions, todo: Sequence[Candidate], *,
                    existing: bool) -> tuple[StoredFacts, Gate | None]:
        """The batch's facts and, read beside them, its gate (None: nothing gates)."""
        facts, inputs = await asyncio.gather(decisions.facts_for(todo, existing=existing),
                                             self.inputs(todo))
        return facts, self.gate(inputs, facts)

    async def inputs(self, candidates: Sequence[Candidate]) -> GateInputs:
        if self.loaded is None:
            self.loaded = await self.service.source.inputs([c.decision for c in candidates])
        return self.loaded

    def gate(self, inputs: GateInputs, facts: StoredFacts) -> Gate | None:
        """A gate for one triage; None when nothing can refuse or hold a decision."""
        if not inputs.rules.gates and not inputs.approvals:
            return None
        return Gate(replace(inputs, ancestors=facts.blocking_ancestors), self.budget,
                    self.memo)

    def effects(self, gate: Gate | None, facts: StoredFacts, now: datetime) -> GateEffects:
        """What the gate decided, as the transaction's writes."""
        if gate is None:
            return GateEffects()
        errors = {o.decision.plan_id for o in gate.outcomes
                  if o.invariant.severity is Severity.ERROR}
        blocked = errors | set(facts.blocked_plans)
        return GateEffects([found(o, now, o.decision.plan_id in blocked)
                            for o in gate.outcomes], list(gate.holds))

    async def committed(self, gate: Gate | None, effects: GateEffects) -> None:
        """After the commit: cache the chains, announce the violations found (their
        events and invariant_enforced decisions leave the outbox now; the relay covers a
        publish that fails)."""
        if gate is None:
            return
        self.service.source.remember(gate.chains)
        for f in effects.found:
            await outbox.flush(self.service.outbox, self.service.publisher,
                               f.violation.violation_id)
        for h in effects.holds:
            if h.status is HoldStatus.AWAITING_APPROVAL:
                await outbox.flush(self.service.outbox, self.service.publisher,
                                   outbox_key(h.decision_id))


class GateService:
    def __init__(self, source: GateInputsSource, outbox: OutboxRecords,
                 publisher: EventPublisher,
                 budget_ms: float = DEFAULT_BUDGET_MS) -> None:
        self.source = source
        self.outbox = outbox
        self.publisher = publisher
        self.budget_ms = budget_ms

    def begin(self, decisions: int) -> BatchGate:
        """The gate of a batch of `decisions` decisions, with their budget."""
        return BatchGate(self, Budget(self.budget_ms * max(1, decisions) / 1000))
