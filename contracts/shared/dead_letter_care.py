"""What an operator does with a dead letter besides reading it: retry it when a retry
can succeed, or discard it (recorded: who, when, why).

A retry republishes the same bytes. A rule that judges only the bytes (the schema, the
JSON, an ID's form, the size) refuses them again, so such a letter is not retried:
`retry_outlook` says so before anything is published, and the operator discards it
instead. A rule that judges the ledger's state (a parent not recorded yet, a plan
blocked by an open violation, an invariant not known yet, deliveries that failed while
a server was down) may pass once that state changed: those are retried. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import Field, field_validator

from contracts.shared.base import Frozen
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.text import NonEmptyStr

REASON_MAX_CHARS = 1000
_LETTER_ID = re.compile(r"^[A-Z][A-Z0-9_-]{0,31}:[0-9]{1,20}$")

STATE_RULES = frozenset({
    Rule.MAX_DELIVERIES,          # every delivery failed (a server down, a timeout)
    Rule.PARENT_EXISTS,           # its parent was not recorded in time
    Rule.RECONCILIATION_BLOCKED,  # its plan had an open error violation
    Rule.INVARIANT_EXISTS,        # its violation named an invariant not known then
})
"""Rules whose verdict depends on the ledger's state: a retry may pass once it changed.
Every other rule judges the message itself (or history that a retry cannot undo: a
superseded parent, a rolled-back plan, an ID already taken), and refuses it again."""


def stream_of(dead_letter_id: str) -> str | None:
    """The stream of `<stream>:<sequence>`, or None for another shape."""
    return dead_letter_id.split(":", 1)[0] if _LETTER_ID.match(dead_letter_id) else None


class DiscardRequest(Frozen):
    """Published to `decisions.discard.<stream>` (Nats-Msg-Id `discard:<dead_letter_id>`):
    the workers mark the dead letter discarded, with who (the verified principal) and
    when; it stays readable (`agents dead-letters list --discarded`) and no longer
    counts as needing a person."""

    dead_letter_id: str = Field(description="'<stream>:<sequence>' of the dead letter.",
                                examples=["DECISIONS:17"])
    reason: NonEmptyStr = Field(max_length=REASON_MAX_CHARS,
                                description="Why it is discarded, kept with the letter.")

    @field_validator("dead_letter_id")
    @classmethod
    def _letter_id(cls, value: str) -> str:
        if stream_of(value) is None:
            raise ValueError("dead_letter_id is '<STREAM>:<sequence>', e.g. DECISIONS:17")
        return value

    def msg_id(self) -> str:
        return f"discard:{self.dead_letter_id}"


@dataclass(frozen=True, slots=True)
class RetryOutlook:
    retryable: bool
    why: str
    """When not retryable: the sentence saying which rule will refuse it again."""


def retry_outlook(errors: list[RuleViolation]) -> RetryOutlook:
    """Whether republishing the same bytes can pass the rules that refused them."""
    fixed = [e for e in errors if e.rule not in STATE_RULES and e.rule is not Rule.MORE_ERRORS]
    if not fixed:
        return RetryOutlook(True, "")
    first = fixed[0]
    return RetryOutlook(False, f"a retry republishes the same bytes, and rule "
                               f"{first.rule.value} would refuse them again ({first.message})")


def duplicate_window_end(rejected_at: datetime, window_seconds: float) -> datetime:
    """When JetStream forgets the message's Nats-Msg-Id at the latest: its window runs
    from the first publish, which came before the rejection."""
    return rejected_at + timedelta(seconds=window_seconds)
