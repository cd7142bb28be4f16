"""Reading a message body as a JSON object, with the named rule each failure breaks.

Every consumer (decisions, correction requests and cancels, violation reports) reads
its bodies through this, so "too large", "not UTF-8", "not JSON" and "not an object"
are reported the same way everywhere, and nothing a body holds makes reading raise:
nesting deep enough to exhaust the parser's recursion (`[[[[…`), an integer of more
digits than Python converts, anything else the parser throws is the body's fault.
"""

from __future__ import annotations

import json
from typing import Any

from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.rules import Rule, RuleViolation


def too_large(data: bytes, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> RuleViolation | None:
    """The rule a body over `max_bytes` breaks; checked before anything parses it."""
    if len(data) <= max_bytes:
        return None
    return RuleViolation(
        rule=Rule.PAYLOAD_TOO_LARGE,
        message=f"payload is {len(data)} bytes; at most {max_bytes} are accepted "
        "(MAX_PAYLOAD_BYTES); it was not read")


def unreadable(exc: BaseException, what: str) -> RuleViolation:
    """Any failure while reading or validating one message, named for its author."""
    if isinstance(exc, RecursionError):
        message = f"payload nests arrays or objects too deeply to read as {what}"
    else:
        message = f"payload could not be read as {what}: {type(exc).__name__}: {exc}"
    return RuleViolation(rule=Rule.UNREADABLE, message=message)


def json_object(data: bytes, what: str) -> dict[str, Any] | RuleViolation:
    """The body as a dict, or the rule it breaks. `what` names the expected model.

    The caller checks the size first (`too_large`): this reads whatever it is given."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RuleViolation(
            rule=Rule.NOT_UTF8,
            message=f"payload is not UTF-8 ({exc.reason} at byte {exc.start})")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return RuleViolation(
            rule=Rule.NOT_JSON,
            message=f"payload is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except Exception as exc:  # RecursionError, ValueError (a huge int): the body is at fault
        return unreadable(exc, what)
    if not isinstance(raw, dict):
        return RuleViolation(rule=Rule.SCHEMA, message=f"payload must be a JSON object ({what})")
    return raw
