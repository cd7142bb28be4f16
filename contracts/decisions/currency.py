"""Whether a search (and a bulk filter) keeps current decisions, superseded ones, or
both: apart from the search's models so the CLI can name it in its options without
importing pydantic (`agents --help` stays quick)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Currency"]


class Currency(StrEnum):
    """Whether a search keeps decisions still in their plan's tree, reverted ones, or both."""

    ANY = "any"
    CURRENT = "current"
    SUPERSEDED = "superseded"
