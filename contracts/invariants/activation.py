"""What a check sees of a decision: the values of `CHECK_VARIABLES`, bounded.

Only the variables the checks in force name are built (converting a value into CEL
costs about 20 µs per key, more than evaluating most expressions). A list over
`MAX_LIST_ENTRIES` entries is not cut (a violation in entry 300 would pass unseen): the
evaluation is then `input_too_large`, an outcome like any evaluation error
(contracts.invariants.evaluation). With one comprehension per expression and lists
of at most 256 entries, one evaluation is bounded to some tens of milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.decisions.model import Decision

MAX_LIST_ENTRIES = 256


class InputTooLarge(ValueError):
    """A variable a check reads is a list longer than MAX_LIST_ENTRIES."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        super().__init__(f"{name} has {size} entries; a check reads at most "
                         f"{MAX_LIST_ENTRIES}")


@dataclass(frozen=True, slots=True)
class PlanScope:
    """What the plan says of itself: a check reads its project and action template."""

    project: str | None = None
    action_template: str | None = None


def _artifacts(d: Decision, _: Sequence[str], __: PlanScope) -> Any:
    return [a.artifact_path for a in d.artifacts_produced]


def _resources(d: Decision, _: Sequence[str], __: PlanScope) -> Any:
    return [{"id": r.resource_id, "path": r.path} for r in d.context_snapshot.relevant_resources]


def _paths(d: Decision, _: Sequence[str], __: PlanScope) -> Any:
    return [*(a.artifact_path for a in d.artifacts_produced),
            *(r.path for r in d.context_snapshot.relevant_resources if r.path)]


def _tool(d: Decision, _: Sequence[str], __: PlanScope) -> Any:
    if d.tool is None:
        return {"name": "", "arguments": {}}
    return {"name": d.tool.name, "arguments": d.tool.arguments}


Builder = Callable[[Decision, Sequence[str], PlanScope], Any]

BUILDERS: dict[str, Builder] = {
    "decision_type": lambda d, _, __: d.decision_type.value,
    "question": lambda d, _, __: d.question,
    "chosen_option": lambda d, _, __: d.chosen_option,
    "alternatives": lambda d, _, __: list(d.alternatives_considered),
    "confidence": lambda d, _, __: d.confidence_score,
    "artifacts": _artifacts,
    "resources": _resources,
    "paths": _paths,
    "tool": _tool,
    "path": lambda _, path, __: list(path),
    "project": lambda _, __, scope: scope.project,
    "action_template": lambda _, __, scope: scope.action_template,
}
"""How each variable of contracts.invariants.checks.CHECK_VARIABLES is read."""


def activation(d: Decision, names: Iterable[str], path: Sequence[str],
               scope: PlanScope) -> dict[str, Any]:
    """The values of `names` for `d`; InputTooLarge for a list over the bound. `path` is
    the decision types from the plan's root down to `d`'s parent."""
    out: dict[str, Any] = {}
    for name in names:
        value = BUILDERS[name](d, path, scope)
        if isinstance(value, list) and len(value) > MAX_LIST_ENTRIES:
            raise InputTooLarge(name, len(value))
        out[name] = value
    return out
