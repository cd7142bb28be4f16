"""What the operator's front ends ask of the read port beyond one ID: the plans that
match a filter, and the records an ID's last characters name.

Plain values, answered by whichever store implements the read port
(services/read_ports.py). An ID read from a person may be its last few characters (the
tree shows `…ZD5CJVAF`): a ULID's first ten characters are its time, so IDs made in one
burst share them, while the last sixteen are random, so a short suffix is nearly always
unique. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from contracts.shared.ids import is_ulid

__all__ = ["SUFFIX_MIN", "IdKind", "IdMatch", "RootFilter", "suffix_of"]

SUFFIX_MIN = 4
"""Fewest characters a suffix may have: four are 20 random bits, enough to name one
record among a few thousand; fewer would be ambiguous everywhere."""
_CROCKFORD = re.compile(r"^[0-9A-HJKMNP-TV-Z]+$")


class IdKind(StrEnum):
    """What an ID can name."""

    PLAN = "plan"
    DECISION = "decision"
    CORRECTION = "correction"
    INVARIANT = "invariant"
    VIOLATION = "violation"


@dataclass(frozen=True, slots=True)
class IdMatch:
    kind: IdKind
    id: str
    plan_id: str | None = None
    """The plan it belongs to (a decision's, a correction's, a violation's); None else."""


def suffix_of(raw: str) -> str | None:
    """The ID suffix `raw` spells (upper-cased, a leading `…` or `...` dropped), or None
    when it cannot be one: too short, longer than a ULID, or outside Crockford base32.
    A whole ULID is a suffix of itself."""
    text = raw.strip().removeprefix("…").removeprefix("...").upper()
    if len(text) < SUFFIX_MIN or len(text) > 26 or not _CROCKFORD.match(text):
        return None
    if len(text) == 26 and not is_ulid(text):
        return None
    return text


@dataclass(frozen=True, slots=True)
class RootFilter:
    """Which plans a plan list shows, by what their root decision holds (the status is a
    plan record's, filtered by the read model: services/tree_model.py)."""

    project: str | None = None
    agent: str | None = None
    """The principal that signed the root, as verified (`recorded_by`); a root recorded
    unsigned (development) counts under the agent name it gives itself (`agent.name`),
    a signed one only under its signer."""
    since: datetime | None = None
    """Roots created at or after this time (UTC)."""
    until: datetime | None = None
    """Roots created before this time (UTC)."""
    text: str | None = None
    """Case-insensitive, in the root's question or chosen option (the plan's prompt)."""

    @property
    def empty(self) -> bool:
        return not (self.project or self.agent or self.since or self.until or self.text)
