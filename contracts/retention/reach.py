"""What one erasure reaches, as the store found it (store.erasure), and its bound."""

from __future__ import annotations

from dataclasses import dataclass, field

ERASE_MAX = 10_000
"""Most decisions one erasure reaches: more is refused, to be narrowed (a plan at a time)."""


class TooMany(ValueError):
    """The erasure would reach more than ERASE_MAX decisions."""


@dataclass
class Reach:
    """The records one erasure removes text from."""

    decision_ids: list[str] = field(default_factory=list)
    plan_ids: list[str] = field(default_factory=list)
    correction_ids: list[str] = field(default_factory=list)
    """The corrections about those decisions (their guidance and copied choice)."""
    child_plans: list[str] = field(default_factory=list)
    """The plans those corrections spawned (their guidance)."""
    archives: list[tuple[str, str]] = field(default_factory=list)
    """(plan_id, correction_id) of every correction whose archive may hold their files."""
