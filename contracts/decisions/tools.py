"""What a tool_invocation runs: the tool's name and the arguments it is called with.

Carried as data (not only as words in chosen_option) so an invariant's check can read
it (`tool.name == "shell" && tool.arguments.cmd.contains("rm -rf")`). The arguments
are the agent's, so they are bounded like every other field: a JSON object of at most
`MAX_ARGUMENTS_BYTES` when serialised, nested at most `MAX_ARGUMENTS_DEPTH` deep, no
object or list over `MAX_ARGUMENTS_ENTRIES` entries. A check then never walks more
than a few hundred entries of it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, Field, JsonValue
from pydantic_core import PydanticCustomError

from contracts.decisions.actors import Label
from contracts.shared.base import Frozen

MAX_ARGUMENTS_BYTES = 16 * 1024
MAX_ARGUMENTS_DEPTH = 8
MAX_ARGUMENTS_ENTRIES = 256


def _problem(value: Any, depth: int = 1) -> str | None:
    """Why `value` is out of bounds, or None. Recursion stops at the depth bound."""
    if isinstance(value, dict | list):
        if depth > MAX_ARGUMENTS_DEPTH:
            return f"nest at most {MAX_ARGUMENTS_DEPTH} levels deep"
        if len(value) > MAX_ARGUMENTS_ENTRIES:
            return f"hold at most {MAX_ARGUMENTS_ENTRIES} entries per object or list"
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            problem = _problem(item, depth + 1)
            if problem:
                return problem
    return None


def _bounded(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    problem = _problem(value)
    if problem is None:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > MAX_ARGUMENTS_BYTES:
            problem = f"are at most {MAX_ARGUMENTS_BYTES} bytes as JSON (these are {size})"
    if problem:
        raise PydanticCustomError("schema", "tool.arguments must {problem}",
                                  {"problem": problem, "field": "tool.arguments"})
    return value


class ToolCall(Frozen):
    """The tool a tool_invocation runs and its arguments, as the agent calls it."""

    name: Label = Field(description="The tool's name, e.g. shell or write_file.",
                        examples=["shell"])
    arguments: Annotated[dict[str, JsonValue], AfterValidator(_bounded)] = Field(
        default_factory=dict,
        description=f"The arguments, a JSON object: at most {MAX_ARGUMENTS_BYTES} bytes, "
        f"{MAX_ARGUMENTS_DEPTH} levels, {MAX_ARGUMENTS_ENTRIES} entries per object or list.",
        examples=[{"cmd": "pytest -q"}])
