"""The named rules a message can break, and how a broken rule is reported.

Every rejection names one of these rules and the field it concerns, so an agent
author reading `decisions.rejected.*` knows exactly what to fix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Set
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from contracts.shared.bounds import MAX_ERRORS, MAX_FIELD_BYTES, MAX_TEXT_BYTES, clip


class Rule(StrEnum):
    """Every rule the recorder enforces, by name."""

    # The specified validation rules (ADR 0001; decision_model.md, "Validation Rules").
    VALID_ULID = "valid_ulid"
    CONFIDENCE_RANGE = "confidence_range"
    ROOT_HAS_NO_PARENT = "root_has_no_parent"
    CORRECTION_NEEDS_TARGET = "correction_needs_target"
    TARGET_NEEDS_CORRECTION_FLAG = "target_needs_correction_flag"
    NON_EMPTY = "non_empty"
    # Tree rules the specification implies (ADR 0001).
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
    # Invariants (contracts.invariants.model): a blocked plan, and reading a violation report.
    RECONCILIATION_BLOCKED = "reconciliation_blocked"
    MSG_ID_MATCHES_REQUEST = "msg_id_matches_request"
    PLAN_STARTED = "plan_started"
    """A template is applied only to a plan whose root is recorded."""
    TEMPLATE_CONFLICT = "template_conflict"
    """The plan already uses another action template."""
    INVARIANT_VIOLATED = "invariant_violated"
    """A checked invariant whose consequence is refuse does not hold for the decision."""
    INVARIANT_UNEVALUATED = "invariant_unevaluated"
    """A checked error invariant could not be evaluated on the decision (refused: what
    could not be checked is not let through)."""
    MSG_ID_MATCHES_VIOLATION = "msg_id_matches_violation"
    RESOLVED_BY_OPERATOR = "resolved_by_operator"
    INVARIANT_EXISTS = "invariant_exists"
    VIOLATION_ID_CONFLICT = "violation_id_conflict"
    # Hostile input (ADR 0011): any failure while reading one message is that message's.
    UNREADABLE = "unreadable"
    """Reading it failed in a way no other rule names (e.g. nested too deeply)."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    """The body is over MAX_PAYLOAD_BYTES; it was refused unread."""
    MORE_ERRORS = "more_errors"
    """Not a rule of its own: the last entry of a report cut at MAX_ERRORS, counting the
    violations not listed (contracts.shared.bounds)."""
    # Archive safety (ADR 0018): an artifact_path a revert could not archive safely.
    SAFE_ARTIFACT_PATH = "safe_artifact_path"
    MAX_DELIVERIES = "max_deliveries"
    """Retries exhausted: every delivery of the message failed (each attempt's error listed)."""
    # The current tree stays a tree (ADR 0019): nothing current under what a correction removed.
    PARENT_SUPERSEDED = "parent_superseded"
    """The parent was superseded by a revert: resume under the replacement decision."""
    PLAN_ROLLED_BACK = "plan_rolled_back"
    """The plan was rolled back by a revert of the decision that spawned it."""
    # A correction stays inside its plan's lineage: the plan and its child plans.
    CHILD_PLAN_CLAIM = "child_plan_claim"
    """A plan has at most one parent, never itself or an ancestor, and never a plan that
    began before the decision claiming it; a root naming its parent must agree."""
    DOWNSTREAM_IN_LINEAGE = "downstream_in_family"  # the wire value is a public contract
    """downstream_decision_ids names only decisions of the same plan (or of its child
    plans), never the decision itself or its parent."""
    # Who sent it (contracts.trust): the signature every inbound message may carry.
    UNSIGNED = "unsigned"
    """No Ledger-* signature headers, where signatures are required (REQUIRE_SIGNATURES)."""
    BAD_SIGNATURE = "bad_signature"
    """Signature headers malformed, incomplete, or not a signature of this message by
    the key named (a changed byte, another subject, another principal's key)."""
    UNKNOWN_KEY = "unknown_key"
    """Signed by a key no principal of the principals file holds."""
    KEY_REVOKED = "key_revoked"
    """Signed at a time the key was revoked or outside its validity window."""
    SIGNED_AT_SKEW = "signed_at_skew"
    """Ledger-Signed-At further from the stream's timestamp than SIGNATURE_MAX_SKEW_SECONDS."""
    WRONG_ROLE = "wrong_role"
    """The signer's role does not publish this family (an agent signing a correction)."""
    SET_BY_LEDGER = "set_by_ledger"
    """A field the ledger fills in from what it verified (who recorded, reported)."""
    # Ownership (contracts.trust.ownership): a plan is its root signer's and delegates'.
    PLAN_OWNER = "plan_owner"
    """Decisions into a plan, reports against it and claims of it as a child plan come
    only from its owner (the root's signer) or the delegates its root names."""
    OPERATOR_SCOPE = "operator_scope"
    """An operator acts only on plans of the projects the principals file gives it."""
    CREATED_AT_SKEW = "created_at_skew"
    """created_at further from the stream's timestamp than CREATED_AT_MAX_SKEW_SECONDS."""
    CREATED_BEFORE_PARENT = "created_before_parent"
    """created_at earlier than its parent decision's."""
    # Approvals (contracts.invariants.approvals): a person's verdict on a held decision.
    APPROVAL_EXISTS = "approval_exists"
    """The verdict names a decision no approval was requested for."""
    APPROVAL_CLOSED = "approval_closed"
    """The approval was granted, denied or expired already: a verdict is final."""
    APPROVAL_EXPIRED = "approval_expired"
    """The verdict came after the approval's expires_at (APPROVAL_TTL_SECONDS)."""
    APPROVAL_DIGEST = "approval_digest"
    """The verdict names other content than the decision the approval binds."""
    APPROVER_REFUSED = "approver_refused"
    """Only a verified operator approves or denies (an agent, a worker, an unsigned
    verdict where principals are verified are refused); outside its projects it is
    operator_scope."""


class RuleViolation(BaseModel):
    """One broken rule: which, on which field, and a sentence a person can act on."""

    model_config = ConfigDict(frozen=True)

    rule: Rule = Field(description="The name of the broken rule.")
    field: str | None = Field(
        default=None, description="Dotted path of the field concerned, if any."
    )
    message: str = Field(description="What is wrong, in one sentence "
                         f"(at most {MAX_TEXT_BYTES} bytes: echoed input is cut).")

    @field_validator("message")
    @classmethod
    def _clip_message(cls, value: str) -> str:
        return clip(value, MAX_TEXT_BYTES)

    @field_validator("field")
    @classmethod
    def _clip_field(cls, value: str | None) -> str | None:
        return None if value is None else clip(value, MAX_FIELD_BYTES)

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        return f"{self.rule}{where}: {self.message}"


_RULE_OF: dict[str, Rule] = {r.value: r for r in Rule}


def violations_from(error: ValidationError) -> list[RuleViolation]:
    """Map pydantic's errors onto named rules, every one of them (for local validation
    in the clients; a worker reading the wire uses `Violations`, which stops listing).

    Our own validators raise `PydanticCustomError` whose type is a `Rule` value;
    pydantic's built-in errors (missing field, wrong type) all fall under `schema`.
    """
    found = Violations(limit=error.error_count())
    found.add_validation_error(error)
    return list(found.result())


class Violations:
    """A message's broken rules as they are found: the first `limit` are listed, the
    rest only counted, so a body built to break a rule 100,000 times costs 20 reports.

    `result()` ends with one `more_errors` entry naming how many were left out, by rule.
    """

    def __init__(self, limit: int = MAX_ERRORS) -> None:
        self._limit = limit
        self._listed: list[RuleViolation] = []
        self._more: Counter[Rule] = Counter()

    def __bool__(self) -> bool:
        return bool(self._listed or self._more)

    def add(self, violation: RuleViolation) -> None:
        if len(self._listed) < self._limit:
            self._listed.append(violation)
        else:
            self._more[violation.rule] += 1

    def extend(self, violations: Iterable[RuleViolation]) -> None:
        for v in violations:
            self.add(v)

    def add_validation_error(self, error: ValidationError,
                             ignore: Set[str] = frozenset()) -> None:
        """pydantic's errors, built into violations only while there is room; errors of
        the top-level fields in `ignore` are left out."""
        for err in error.errors(include_url=False, include_input=False):
            if err["loc"] and err["loc"][0] in ignore:
                continue
            rule = _RULE_OF.get(err["type"], Rule.SCHEMA)
            if len(self._listed) >= self._limit:
                self._more[rule] += 1
                continue
            ctx = err.get("ctx") or {}
            field = ctx.get("field") or ".".join(str(p) for p in err["loc"]) or None
            self._listed.append(RuleViolation(rule=rule, field=field, message=err["msg"]))

    def result(self) -> tuple[RuleViolation, ...]:
        if not self._more:
            return tuple(self._listed)
        counts = ", ".join(f"{rule.value} x{n}" for rule, n in self._more.most_common())
        summary = RuleViolation(
            rule=Rule.MORE_ERRORS,
            message=f"and {self._more.total()} more not listed ({counts})")
        return (*self._listed, summary)


def bounded(violations: list[RuleViolation]) -> list[RuleViolation]:
    """At most MAX_ERRORS + 1 entries: a report built by hand is cut like a read one."""
    if len(violations) <= MAX_ERRORS + 1:
        return violations
    found = Violations()
    found.extend(violations)
    return list(found.result())


BoundedViolations = Annotated[list[RuleViolation], AfterValidator(bounded)]
"""The `errors` of a rejection event or dead letter: never more than MAX_ERRORS + 1."""

EchoText = Annotated[str, AfterValidator(clip)]
"""Text a report echoes from the input (a subject, an ID): cut at MAX_TEXT_BYTES."""

ERRORS_DOC = (f"Every rule it broke, the first {MAX_ERRORS} listed; past those, one last "
              "entry with rule more_errors counts the rest by rule.")
