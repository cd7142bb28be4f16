"""Turning an exception raised while reading one message into a bounded, named report.

Readers are written to return every broken rule instead of raising, but hostile input
finds the paths nobody thought of (a 5 KB `[[[[` body raises RecursionError in the JSON
parser, a date at the edge of the calendar OverflowError once shifted to UTC). The
inbound pipeline reads each message through `guarded`, so such a message becomes its
own dead letter (rule `unreadable`) and never takes its batch down with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from contracts.shared.ids import is_ulid
from contracts.shared.rules import Rule, RuleViolation

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Unreadable:
    """A command or report that will never be read (a correction request, cancel, fail or
    retry; a violation report): its plan and its own ID (correction_id, violation_id)
    when those could be read, to address the rejection, and every rule it broke."""

    plan_id: str | None
    message_id: str | None
    violations: tuple[RuleViolation, ...]

    @property
    def reason(self) -> str:
        return "; ".join(str(v) for v in self.violations)


def ulid_or_none(value: object) -> str | None:
    """An ID fit to echo (and to address `<prefix>.rejected.<plan_id>`): a ULID in
    canonical upper case, or None."""
    return value.upper() if isinstance(value, str) and is_ulid(value) else None


ERROR_TEXT_LIMIT = 300
"""Characters of an exception's text kept in a report; the rest is cut with a marker."""


def truncate(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def describe(exc: BaseException, limit: int = ERROR_TEXT_LIMIT) -> str:
    """`<type>: <text>`, bounded; never raises (an exception's __str__ may)."""
    try:
        text = str(exc)
    except Exception:  # a hostile __str__ must not escape the report
        text = "<unprintable>"
    return truncate(f"{type(exc).__name__}: {text}", limit)


def unreadable(exc: BaseException) -> RuleViolation:
    return RuleViolation(rule=Rule.UNREADABLE,
                         message=f"the message could not be read: {describe(exc)}")


def guarded(read: Callable[[], T]) -> T | RuleViolation:
    """`read()`, or the `unreadable` violation for whatever it raised."""
    try:
        return read()
    except Exception as exc:  # any failure is this message's, not the batch's
        return unreadable(exc)
