"""Lifecycles as data: one transition table per machine and one guard.

Every state change in the ledger goes through `check_transition` before anything
is written, so an illegal move is refused with `IllegalTransition` instead of
being half-applied. Terminal states are derived from the table rather than listed
separately, so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Generic, TypeVar

from contracts.shared.errors import IllegalTransition

__all__ = [
    "Lifecycle",
    "TransitionTable",
    "check_transition",
    "is_allowed",
    "states_of",
    "terminal_states",
]

S = TypeVar("S", bound=Enum)

TransitionTable = Mapping[S, frozenset[S]]
"""state -> the states it may move to. A state with no outgoing edge is terminal."""


def states_of(table: Mapping[S, frozenset[S]]) -> frozenset[S]:
    """Every state the table mentions, as a source or as a target."""
    out: set[S] = set(table)
    for targets in table.values():
        out |= targets
    return frozenset(out)


def terminal_states(
    table: Mapping[S, frozenset[S]], reopen: Mapping[S, frozenset[S]] | None = None
) -> frozenset[S]:
    """States with no outgoing edge but the `reopen` ones (an operator's explicit command,
    such as a retry): nothing moves out of them on its own, so a runner stops there."""
    reopen = reopen or {}
    return frozenset(
        s for s in states_of(table) if not table.get(s, frozenset()) - reopen.get(s, frozenset())
    )


def is_allowed(table: Mapping[S, frozenset[S]], from_: S, to: S) -> bool:
    # Self-loops are refused even if a table lists one: a transition must change
    # something, or an event per transition would be published for nothing.
    return from_ != to and to in table.get(from_, frozenset())


def check_transition(
    table: Mapping[S, frozenset[S]], from_: S, to: S, *, machine: str | None = None
) -> None:
    """Raise `IllegalTransition` unless `from_ -> to` is an edge of `table`."""
    if not is_allowed(table, from_, to):
        raise IllegalTransition(
            machine or type(from_).__name__,
            from_,
            to,
            allowed=frozenset(table.get(from_, frozenset())),
        )


@dataclass(frozen=True)
class Lifecycle(Generic[S]):
    """A named transition table, so errors say which machine refused."""

    name: str
    table: Mapping[S, frozenset[S]]
    initial: S
    reopen: Mapping[S, frozenset[S]] = field(default_factory=lambda: MappingProxyType({}))
    """Edges of `table` that only an explicit operator command takes (e.g. a retry out of
    FAILED). Their source still counts as terminal: nothing leaves it on its own."""

    def __post_init__(self) -> None:
        # Freeze the tables: they are module-level data shared by every caller.
        object.__setattr__(self, "table", MappingProxyType(dict(self.table)))
        object.__setattr__(self, "reopen", MappingProxyType(dict(self.reopen)))
        if self.initial not in self.table:
            raise ValueError(f"{self.name}: initial state {self.initial} has no table entry")
        for from_, targets in self.reopen.items():
            if not targets <= self.table.get(from_, frozenset()):
                raise ValueError(f"{self.name}: reopen edges of {from_} are not in the table")

    @property
    def states(self) -> frozenset[S]:
        return states_of(self.table)

    @property
    def terminal(self) -> frozenset[S]:
        return terminal_states(self.table, self.reopen)

    def is_terminal(self, state: S) -> bool:
        return state in self.terminal

    def reopens(self, from_: S, to: S) -> bool:
        """Whether `from_ -> to` is an operator-only edge out of a terminal state."""
        return self.allows(from_, to) and to in self.reopen.get(from_, frozenset())

    def sources(self, to: S) -> frozenset[S]:
        """The states from which `to` may be entered (for a store's conditional write)."""
        return frozenset(s for s in self.states if self.allows(s, to))

    def allows(self, from_: S, to: S) -> bool:
        return is_allowed(self.table, from_, to)

    def check(self, from_: S, to: S) -> None:
        check_transition(self.table, from_, to, machine=self.name)
