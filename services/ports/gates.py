"""What the recorder's gate reads for a batch (store.gate_source), and the holds it
writes that the judge moves on (store.holds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from contracts.decisions.model import Decision
from contracts.invariants.approval_wire import VerdictOutcome
from contracts.invariants.approvals import Approval, ApprovalStatus
from contracts.invariants.gate import GateInputs
from contracts.invariants.holds import Hold, HoldReason, HoldStatus
from contracts.invariants.outcomes import GateEffects
from contracts.invariants.rules import RuleSet


class GateInputsSource(Protocol):
    async def inputs(self, decisions: Sequence[Decision]) -> GateInputs:
        """The rule set as of its current version, and the batch's plans' facts."""
        ...

    async def rules(self) -> RuleSet:
        """The rule set as of its current version."""
        ...

    def remember(self, chains: Mapping[str, tuple[str, ...]]) -> None:
        """Type chains of decisions just committed (cached: they never change)."""
        ...


class HoldRecords(Protocol):
    """Held decisions (store.holds): the judge's queue."""

    async def get(self, decision_id: str) -> Hold | None: ...

    async def claim(self, owner: str, now: datetime, lease: timedelta
                    ) -> tuple[Hold, int] | None:
        """One hold awaiting the judge, leased to `owner`, with its attempt number."""
        ...

    async def settle(self, hold: Hold, owner: str, status: HoldStatus, *,
                     reasons: list[HoldReason], effects: GateEffects, now: datetime) -> bool:
        """Move a claimed hold on with the violations found; False if the claim was lost."""
        ...


class ApprovalRecords(Protocol):
    """Approvals (store.approvals): read, decided, expired, and the verdicts' outcomes."""

    async def get(self, decision_id: str) -> Approval | None: ...

    async def find(self, status: ApprovalStatus | None = None, plan_id: str | None = None,
                   limit: int = 1000) -> list[Approval]: ...

    async def due(self, now: datetime, limit: int = 100) -> list[Approval]: ...

    async def decide(self, decided: Approval, names: dict[str, str], now: datetime) -> bool:
        """Move a requested approval on (with its hold, violations, events); False if it
        was no longer requested."""
        ...

    async def outcome(self, request_id: str) -> VerdictOutcome | None: ...

    async def keep(self, outcome: VerdictOutcome) -> None: ...
