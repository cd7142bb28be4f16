"""Named domain errors.

Workers map these onto outcomes (FAILED with the message, a refusal event, a
term instead of a nak): a retry cannot fix any of them, so each one names the
rule that was broken and carries the values needed to say so in one sentence.
They deliberately do not subclass ValueError, so pydantic never swallows one
into a ValidationError and a caller cannot confuse them with bad input.
"""

from __future__ import annotations

from enum import Enum


class DomainError(Exception):
    """Base of every error the pure domain raises on purpose."""


class IllegalTransition(DomainError):
    """A lifecycle was asked to move along an edge its table does not have."""

    def __init__(
        self, machine: str, from_: Enum, to: Enum, *, allowed: frozenset[Enum] = frozenset()
    ) -> None:
        self.machine = machine
        self.from_ = from_
        self.to = to
        self.allowed = allowed
        if from_ == to:
            why = "self-transitions are not allowed"
        elif not allowed:
            why = f"{from_.value} is terminal"
        else:
            why = "allowed from here: " + ", ".join(sorted(str(s.value) for s in allowed))
        super().__init__(
            f"{machine}: illegal transition {from_.value} -> {to.value} ({why})"
        )
