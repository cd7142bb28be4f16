"""What the recorder's gate reads for a batch (the store's answer: store.gate_source)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from contracts.decisions.model import Decision
from contracts.invariants.gate import GateInputs
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
