"""What the operator's views count: per plan (the console's plan list) and for the whole
ledger (`agents status`, the workers' gauges).

Plain values, computed by whichever store answers the read port
(services/read_ports.py): the MongoDB store by aggregations the indexes answer, the
in-memory store by counting what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["FAILED_RECENTLY", "IN_FLIGHT_TOO_LONG", "LedgerStatus", "PlanCounts",
           "WorkerSeen"]


@dataclass(frozen=True, slots=True)
class PlanCounts:
    decisions: int = 0
    current: int = 0
    open_corrections: int = 0
    open_violations: int = 0


@dataclass(frozen=True, slots=True)
class WorkerSeen:
    worker_id: str
    host: str | None
    pid: int | None
    started_at: datetime | None
    seen_at: datetime | None
    alive: bool


@dataclass(frozen=True, slots=True)
class LedgerStatus:
    """What needs someone's attention, counted as of one moment."""

    dead_letters: int
    dead_letters_by_rule: dict[str, int] = field(default_factory=dict)
    corrections_in_flight: dict[str, int] = field(default_factory=dict)
    oldest_in_flight_at: datetime | None = None
    violations_open: dict[str, int] = field(default_factory=dict)
    workers: list[WorkerSeen] = field(default_factory=list)
    corrections_failed: int = 0
    """FAILED corrections (an operator retries them, or leaves them failed)."""
    failed_recently: int = 0
    """Those that failed within FAILED_RECENTLY of the moment asked."""
    last_failed_at: datetime | None = None


FAILED_RECENTLY = timedelta(hours=24)
"""How long a FAILED correction counts as news that needs a person (`agents status`)."""
IN_FLIGHT_TOO_LONG = timedelta(minutes=5)
"""A correction not ended this long after its request needs a look (a worker down, a
plan's lease held by a dead process, an archive that hangs)."""
