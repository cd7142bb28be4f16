"""Operator guidance: the text a correction carries to the agent, and a spawned child
plan's prompt. Here, beside the decisions, so a plan can carry it without knowing
corrections."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

GUIDANCE_MIN_CHARS = 1
GUIDANCE_MAX_CHARS = 10_000


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError(
            "non_empty", "rule non_empty: guidance must contain a non-blank character",
            {"rule": "non_empty"},
        )
    return value


Guidance = Annotated[
    str,
    StringConstraints(min_length=GUIDANCE_MIN_CHARS, max_length=GUIDANCE_MAX_CHARS),
    AfterValidator(_not_blank),
]
"""Operator guidance: 1-10,000 characters, counted as sent; all-whitespace is refused."""
