"""Text that must say something: a string field refused when blank (rule non_empty)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError


def _non_empty(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError(
            "non_empty", "rule non_empty: must contain at least one non-blank character",
            {"rule": "non_empty"},
        )
    return value


NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]
