"""Reading a message body as a JSON object, with the named rule each failure breaks.

Every consumer (decisions, correction requests and cancels, violation reports) reads
its bodies through this, so "not UTF-8", "not JSON" and "not an object" are reported
the same way everywhere.
"""

from __future__ import annotations

import json
from typing import Any

from contracts.rules import Rule, RuleViolation


def json_object(data: bytes, what: str) -> dict[str, Any] | RuleViolation:
    """The body as a dict, or the rule it breaks. `what` names the expected model."""
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
    if not isinstance(raw, dict):
        return RuleViolation(rule=Rule.SCHEMA, message=f"payload must be a JSON object ({what})")
    return raw
