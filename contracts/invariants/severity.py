"""How serious a broken invariant is, and what the ledger does about it.

`Severity` is the violation's (reported by an agent, or found by the ledger), and a
checked invariant's own. `Consequence` is what a checked (or judged) invariant does to
a decision that breaks it: the table is `CONSEQUENCES`, the defaults `DEFAULT_CONSEQUENCE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Consequence(StrEnum):
    """What happens to a decision that breaks a checked invariant."""

    REFUSE = "refuse"
    """Not recorded: dead-lettered with rule invariant_violated, the violation stored."""
    HOLD = "hold"
    """Recorded, and held until a person approves it (a GateSink records the hold)."""
    RECORD = "record"
    """Recorded; the violation is stored beside it and announced."""


CONSEQUENCES: Mapping[Severity, frozenset[Consequence]] = MappingProxyType({
    Severity.ERROR: frozenset({Consequence.REFUSE, Consequence.HOLD}),
    Severity.WARNING: frozenset({Consequence.RECORD}),
    Severity.INFO: frozenset({Consequence.RECORD}),
})
"""Which consequences each severity allows: an error never merely records, a warning
never stops a decision."""

DEFAULT_CONSEQUENCE: Mapping[Severity, Consequence] = MappingProxyType({
    Severity.ERROR: Consequence.REFUSE,
    Severity.WARNING: Consequence.RECORD,
    Severity.INFO: Consequence.RECORD,
})
