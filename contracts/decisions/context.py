"""What a decision records of the agent's context window: enough to replay it."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from contracts.shared.base import Frozen
from contracts.shared.text import NonEmptyStr

_HASH = re.compile(r"^(?P<algorithm>[a-z0-9][a-z0-9_-]*):(?P<digest>[0-9a-f]+)$")


def _hash_format(value: str) -> str:
    if not _HASH.match(value):
        raise PydanticCustomError(
            "hash_format",
            "rule hash_format: {value} must be '<algorithm>:<lower-case hex digest>', "
            "e.g. 'sha256:9f86d0…'",
            {"rule": "hash_format", "value": value},
        )
    return value


class ResourceRef(Frozen):
    """A resource the agent had in view (a file, a table, a URL)."""

    resource_id: NonEmptyStr = Field(description="Stable identifier of the resource.")
    path: str | None = Field(default=None, description="Where it lives, if it has a path.")


class ContextSnapshot(Frozen):
    """Enough about the agent's context window to replay the decision."""

    hot_context_hash: Annotated[str, AfterValidator(_hash_format)] = Field(
        description="'<algorithm>:<hex digest>' of the serialised context window.",
        examples=["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
    )
    hot_context_ref: NonEmptyStr = Field(
        description="Storage pointer to the full serialised context.",
        examples=["s3://contexts/01J9Z8Q4S2.json"],
    )
    relevant_resources: list[ResourceRef] = Field(
        default_factory=list, description="Resources in view when deciding."
    )
    actor_state_ref: str | None = Field(
        default=None, description="LangGraph actor checkpoint reference, if any."
    )
