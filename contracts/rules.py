"""The named rules a message can break, and how a broken rule is reported.

Every rejection names one of these rules and the field it concerns, so an agent
author reading `decisions.rejected.*` knows exactly what to fix.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Rule(StrEnum):
    """Every rule the recorder enforces, by name."""

    # Seed validation rules (decision_model.md, "Validation Rules").
    VALID_ULID = "valid_ulid"
    CONFIDENCE_RANGE = "confidence_range"
    ROOT_HAS_NO_PARENT = "root_has_no_parent"
    CORRECTION_NEEDS_TARGET = "correction_needs_target"
    TARGET_NEEDS_CORRECTION_FLAG = "target_needs_correction_flag"
    NON_EMPTY = "non_empty"
    # Tree rules the seeds imply.
    ONLY_ROOT_LACKS_PARENT = "only_root_lacks_parent"
    ONE_ROOT_PER_PLAN = "one_root_per_plan"
    PARENT_IN_SAME_PLAN = "parent_in_same_plan"
    PARENT_EXISTS = "parent_exists"
    HASH_FORMAT = "hash_format"
    # Wire rules of the recording path.
    SCHEMA = "schema"
    NOT_JSON = "not_json"
    NOT_UTF8 = "not_utf8"
    SUBJECT_MATCHES_PLAN = "subject_matches_plan"
    MSG_ID_MATCHES_DECISION = "msg_id_matches_decision"
    SEQUENCE_ASSIGNED_BY_RECORDER = "sequence_assigned_by_recorder"
    CORRECTIONS_USE_WORKFLOW = "corrections_use_workflow"
    DECISION_ID_CONFLICT = "decision_id_conflict"
    # Invariants (contracts.invariants): a blocked plan, and reading a violation report.
    RECONCILIATION_BLOCKED = "reconciliation_blocked"
    MSG_ID_MATCHES_VIOLATION = "msg_id_matches_violation"
    RESOLVED_BY_OPERATOR = "resolved_by_operator"
    INVARIANT_EXISTS = "invariant_exists"
    VIOLATION_ID_CONFLICT = "violation_id_conflict"
    # The inbound pipeline (workers.inbound).
    UNREADABLE = "unreadable"  # any exception while reading or validating one message
    MAX_DELIVERIES = "max_deliveries"  # retries exhausted: every attempt failed


class RuleViolation(BaseModel):
    """One broken rule: which, on which field, and a sentence a person can act on."""

    model_config = ConfigDict(frozen=True)

    rule: Rule = Field(description="The name of the broken rule.")
    field: str | None = Field(
        default=None, description="Dotted path of the field concerned, if any."
    )
    message: str = Field(description="What is wrong, in one sentence.")

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        return f"{self.rule}{where}: {self.message}"


def violations_from(error: ValidationError) -> list[RuleViolation]:
    """Map pydantic's errors onto named rules.

    Our own validators raise `PydanticCustomError` whose type is a `Rule` value;
    pydantic's built-in errors (missing field, wrong type) all fall under `schema`.
    """
    out: list[RuleViolation] = []
    for err in error.errors(include_url=False):
        ctx = err.get("ctx") or {}
        try:
            rule = Rule(err["type"])
        except ValueError:
            rule = Rule.SCHEMA
        field = ctx.get("field") or ".".join(str(p) for p in err["loc"]) or None
        out.append(RuleViolation(rule=rule, field=field, message=err["msg"]))
    return out
