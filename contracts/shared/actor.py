"""Who did something: the principal the inbound pipeline verified, or nobody verified.

A record an operator or an agent causes (a comment, a plan marked completed or
abandoned, a dead letter discarded) names who caused it from what the pipeline
verified, never from a field the sender filled in: a semi-trusted sender can write any
name into a body. A message accepted unsigned (a development ledger that does not
require signatures) makes a record that says `unverified`. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.shared.roles import Role

UNVERIFIED_NAME = "unverified"
"""What a record names as its author when no principal was verified."""


@dataclass(frozen=True, slots=True)
class Actor:
    name: str | None = None
    """The verified principal's name; None when nothing was verified."""
    role: Role | None = None
    """Its role, when verified."""

    @property
    def verified(self) -> bool:
        return self.name is not None

    @property
    def label(self) -> str:
        """What a record stores as its author."""
        return self.name if self.name is not None else UNVERIFIED_NAME

    def is_operator(self) -> bool:
        return self.verified and self.role is Role.OPERATOR


UNVERIFIED = Actor()
