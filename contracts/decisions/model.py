"""The Decision: one choice point in a plan, a node in the plan's decision tree.

Field names, types and rules follow `decision_model.md`. The model validates one
decision on its own; rules that need other decisions (the parent exists and is in
the same plan, one root per plan, not under a superseded parent) are the recorder's,
decided in `contracts.recording.triage` against what the store says.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid, new_id
from contracts.shared.rules import Rule
from contracts.shared.timestamps import utc_field, utc_now


class Phase(StrEnum):
    STRATEGIZE = "Strategize"
    EXECUTE = "Execute"
    ANY = "Any"


class DecisionType(StrEnum):
    """The 11 kinds of choice an agent records."""

    PROMPT_DEFINITION = "prompt_definition"
    INVARIANT_ENFORCED = "invariant_enforced"
    STRATEGY_CHOICE = "strategy_choice"
    IMPLEMENTATION_CHOICE = "implementation_choice"
    RESOURCE_SELECTION = "resource_selection"
    SUBPLAN_SPAWN = "subplan_spawn"
    SUBPLAN_PARALLEL_SPAWN = "subplan_parallel_spawn"
    TOOL_INVOCATION = "tool_invocation"
    ERROR_RECOVERY = "error_recovery"
    VALIDATION_RESPONSE = "validation_response"
    USER_INTERVENTION = "user_intervention"

    @property
    def phase(self) -> Phase:
        return PHASE_OF[self]


PHASE_OF: dict[DecisionType, Phase] = {
    DecisionType.PROMPT_DEFINITION: Phase.STRATEGIZE,
    DecisionType.INVARIANT_ENFORCED: Phase.STRATEGIZE,
    DecisionType.STRATEGY_CHOICE: Phase.STRATEGIZE,
    DecisionType.IMPLEMENTATION_CHOICE: Phase.EXECUTE,
    DecisionType.RESOURCE_SELECTION: Phase.EXECUTE,
    DecisionType.SUBPLAN_SPAWN: Phase.STRATEGIZE,
    DecisionType.SUBPLAN_PARALLEL_SPAWN: Phase.STRATEGIZE,
    DecisionType.TOOL_INVOCATION: Phase.EXECUTE,
    DecisionType.ERROR_RECOVERY: Phase.EXECUTE,
    DecisionType.VALIDATION_RESPONSE: Phase.EXECUTE,
    DecisionType.USER_INTERVENTION: Phase.ANY,
}


def _non_empty(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError(
            "non_empty", "rule non_empty: must contain at least one non-blank character",
            {"rule": "non_empty"},
        )
    return value


NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]

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


ARTIFACT_PATH_MAX_BYTES = 1024
"""Longest artifact_path accepted (UTF-8 bytes); Linux's PATH_MAX is 4096, ours leaves
room for the archive folder the copy lands in."""
ARTIFACT_COMPONENT_MAX_BYTES = 255
"""Longest component (between slashes): NAME_MAX of every common Linux filesystem."""
STORED = "stored"
"""Validation context key: set when loading what is already recorded (see ArtifactRef)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""NUL and the control characters, searched at C speed (every artifact of every decision)."""


def artifact_path_problem(path: str) -> str | None:
    """Why `path` cannot be archived safely, or None when it can.

    A revert copies each artifact from under ARTIFACTS_ROOT into the archive, so the
    path must stay inside that tree (relative, no '..') and be a name the filesystem
    accepts (no NUL, no control characters, components and total within the limits):
    otherwise the copy could read outside the tree or fail on every attempt.
    """
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        return "must be relative to ARTIFACTS_ROOT, not absolute"
    if _CONTROL.search(path):
        return "must not contain NUL or control characters"
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > ARTIFACT_PATH_MAX_BYTES:
        return f"is {size} bytes long; at most {ARTIFACT_PATH_MAX_BYTES} are accepted"
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "must not contain '..' components"
    if any(len(p.encode("utf-8", "surrogatepass")) > ARTIFACT_COMPONENT_MAX_BYTES
           for p in parts):
        return f"has a component over {ARTIFACT_COMPONENT_MAX_BYTES} bytes"
    return None


class ArtifactRef(Frozen):
    """Something the decision produced; archived when the decision is reverted."""

    artifact_path: NonEmptyStr = Field(
        description="Path of the artifact, relative to ARTIFACTS_ROOT: no leading '/', no "
        "'..' component, no NUL or control character, components of at most 255 bytes, "
        "at most 1024 bytes in all (rule safe_artifact_path).",
        examples=["src/db/migrations/0042_add_index.sql"],
    )
    artifact_type: NonEmptyStr = Field(
        description="Kind of artifact (file, patch, report, ...).", examples=["file"]
    )

    @field_validator("artifact_path")
    @classmethod
    def _safe_path(cls, value: str, info: ValidationInfo) -> str:
        # Decisions recorded before the rule existed must still load (a revert of them
        # skips the unsafe path in its manifest), so the store reads with STORED set.
        if isinstance(info.context, dict) and info.context.get(STORED):
            return value
        problem = artifact_path_problem(value)
        if problem is not None:
            raise PydanticCustomError(
                Rule.SAFE_ARTIFACT_PATH.value,
                "rule safe_artifact_path: artifact_path {problem}",
                {"problem": problem},
            )
        return value


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


def _broken(rule: Rule, field: str, message: str) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(rule.value, f"rule {rule.value}: {message}", {"field": field}),
        loc=(field,),
        input=None,
    )


class Decision(Frozen):
    """One recorded choice.

    `sequence_number` is None until the recorder assigns it; `superseded_by` and the
    correction fields are set only by the correction workflow.
    """

    # Identity
    decision_id: Ulid = Field(
        default_factory=new_id,
        description="ULID, generated by the publisher so a retry is the same message.",
        examples=["01JD7X4Q9R8N2V5K3M6P1T0W7Y"],
    )
    plan_id: Ulid = Field(description="ULID of the plan this decision belongs to.")
    parent_decision_id: Ulid | None = Field(
        default=None, description="ULID of the parent decision; None only for the root."
    )
    sequence_number: int | None = Field(
        default=None,
        description="Order within the plan (0-indexed, never reused). Assigned by the recorder.",
    )
    # Classification
    decision_type: DecisionType = Field(description="One of the 11 decision types.")
    # Content
    question: NonEmptyStr = Field(description="The question being answered.")
    chosen_option: NonEmptyStr = Field(description="The option that was selected.")
    alternatives_considered: list[str] = Field(
        default_factory=list, description="Other options evaluated."
    )
    confidence_score: float | None = Field(
        default=None, description="Confidence in the choice, 0.0–1.0, or None."
    )
    # Context
    context_snapshot: ContextSnapshot = Field(description="Context window at decision time.")
    # Rationale
    rationale: str | None = Field(default=None, description="Human-readable explanation.")
    actor_reasoning: str | None = Field(default=None, description="Raw LLM reasoning trace.")
    # Downstream impact
    downstream_decision_ids: list[Ulid] = Field(
        default_factory=list, description="Decisions that depend on this one."
    )
    downstream_plan_ids: list[Ulid] = Field(
        default_factory=list, description="Child plans spawned from this decision."
    )
    artifacts_produced: list[ArtifactRef] = Field(
        default_factory=list, description="Artifacts this decision produced."
    )
    # Timestamps
    created_at: datetime = Field(
        default_factory=utc_now,
        description="UTC; the recorder sets the receive time when absent. Millisecond precision.",
    )
    # Correction metadata
    is_correction: bool = Field(default=False, description="True if this corrects another.")
    corrects_decision_id: Ulid | None = Field(
        default=None, description="The decision this one corrects."
    )
    correction_reason: str | None = Field(default=None, description="Why it was corrected.")
    superseded_by: Ulid | None = Field(
        default=None, description="The decision that replaced this one; None in the current tree."
    )
    superseded_at: datetime | None = Field(
        default=None, description="UTC time the correction that superseded it was written; "
        "None in the current tree (and on decisions superseded before the field existed)."
    )
    superseded_by_correction: Ulid | None = Field(
        default=None, description="The correction that superseded it; None in the current "
        "tree (and on decisions superseded before the field existed)."
    )
    # Plan metadata, meaningful on a root prompt_definition only.
    project: str | None = Field(
        default=None, description="Project the plan targets (root prompt_definition only)."
    )
    action_template: str | None = Field(
        default=None, description="Action template the plan uses (root prompt_definition only)."
    )
    parent_plan_id: Ulid | None = Field(
        default=None, description="The plan that spawned this one (root prompt_definition "
        "only, optional): must agree with the decision that names this plan in its "
        "downstream_plan_ids.")

    @field_validator("sequence_number")
    @classmethod
    def _sequence_not_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise PydanticCustomError("schema", "sequence_number must be >= 0")
        return value

    @field_validator("confidence_score")
    @classmethod
    def _confidence_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 1.0:
            raise PydanticCustomError(
                "confidence_range",
                "rule confidence_range: confidence_score must be in [0.0, 1.0] or None, "
                "got {value}",
                {"value": value},
            )
        return value

    @field_validator("superseded_at")
    @classmethod
    def _utc_or_none(cls, value: datetime | None) -> datetime | None:
        return None if value is None else utc_field(value)

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        # UTC, millisecond precision: what a BSON date holds, so a stored time equals the
        # sent one; a time with no UTC equivalent is a schema violation of created_at.
        return utc_field(value)

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Self:
        broken = cross_field_violations(self)
        if broken:
            raise ValidationError.from_exception_data(type(self).__name__, broken)
        return self

    @property
    def is_root(self) -> bool:
        return self.decision_type is DecisionType.PROMPT_DEFINITION


def cross_field_violations(d: Decision) -> list[InitErrorDetails]:
    """The seed's rules that relate fields of one decision; all are reported at once."""
    broken: list[InitErrorDetails] = []
    if d.decision_type is DecisionType.PROMPT_DEFINITION and d.parent_decision_id is not None:
        broken.append(_broken(Rule.ROOT_HAS_NO_PARENT, "parent_decision_id",
                              "a prompt_definition decision must have parent_decision_id = None"))
    if d.decision_type is not DecisionType.PROMPT_DEFINITION and d.parent_decision_id is None:
        broken.append(_broken(Rule.ONLY_ROOT_LACKS_PARENT, "parent_decision_id",
                              f"a {d.decision_type.value} decision needs a parent_decision_id; "
                              "only the prompt_definition root has none"))
    if d.is_correction and d.corrects_decision_id is None:
        broken.append(_broken(Rule.CORRECTION_NEEDS_TARGET, "corrects_decision_id",
                              "is_correction is True, so corrects_decision_id must be set"))
    if d.corrects_decision_id is not None and not d.is_correction:
        broken.append(_broken(Rule.TARGET_NEEDS_CORRECTION_FLAG, "is_correction",
                              "corrects_decision_id is set, so is_correction must be True"))
    if d.parent_plan_id is not None and not d.is_root:
        broken.append(_broken(Rule.CHILD_PLAN_CLAIM, "parent_plan_id",
                              "only the root prompt_definition names its parent plan"))
    if d.parent_plan_id is not None and d.parent_plan_id == d.plan_id:
        broken.append(_broken(Rule.CHILD_PLAN_CLAIM, "parent_plan_id",
                              "a plan cannot be its own parent"))
    if d.parent_decision_id is not None and d.parent_decision_id == d.decision_id:
        broken.append(_broken(Rule.PARENT_EXISTS, "parent_decision_id",
                              "a decision cannot be its own parent"))
    return broken


def decision_json_schema() -> dict[str, Any]:
    return Decision.model_json_schema()
