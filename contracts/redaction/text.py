"""Redacting text and JSON-shaped values: each match replaced by its rule's placeholder,
and the (place, rule) pairs noted, never the value.

A value is walked only for its strings (numbers, booleans and keys are left as they
are: a key names a field, it is not free text); the walk is bounded by what the caller
passes in (a decision's fields are bounded by its model, a dead letter's payload by
DEAD_LETTER_PAYLOAD_BYTES).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from contracts.redaction.rules import Rules

MAX_MARKS = 100
"""Most (field, rule) pairs one record notes: a hostile body cannot grow its record."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One field redacted by one rule (`count` matches)."""

    field: str
    rule: str
    count: int = 1

    def as_document(self) -> dict[str, Any]:
        return {"field": self.field, "rule": self.rule, "count": self.count}


class Marks:
    """The (field, rule) pairs of one record, counted, at most MAX_MARKS."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, place: str, rule: str) -> None:
        key = (place, rule)
        if key in self._counts or len(self._counts) < MAX_MARKS:
            self._counts[key] = self._counts.get(key, 0) + 1

    def __bool__(self) -> bool:
        return bool(self._counts)

    def result(self) -> tuple[Mark, ...]:
        return tuple(Mark(f, r, n) for (f, r), n in self._counts.items())


def redact_text(rules: Rules, text: str, place: str, marks: Marks) -> str:
    """`text` with every match replaced; each replacement noted at `place`."""
    scanner = rules.scanner
    if scanner is None or not rules.may_match(text):
        return text

    def one(match: re.Match[str]) -> str:
        out = rules.replace(match)
        if out != match.group(0):
            marks.add(place, rules.rule_of(match))
        return out

    return scanner.sub(one, text)


def redact_value(rules: Rules, value: Any, place: str, marks: Marks) -> Any:
    """A JSON-shaped value with its strings redacted (a new value only where one
    changed; containers are walked, keys are not)."""
    if isinstance(value, str):
        return redact_text(rules, value, place, marks)
    if isinstance(value, dict):
        return {k: redact_value(rules, v, f"{place}.{k}", marks) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(rules, v, f"{place}[{i}]", marks) for i, v in enumerate(value)]
    return value


def strings(value: Any, out: list[str]) -> list[str]:
    """Every string in a JSON-shaped value (the fast path's one scan)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            strings(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            strings(v, out)
    return out


def any_match(rules: Rules, texts: list[str]) -> bool:
    """Whether any text may hold something to redact: one search over them all (joined
    by a newline, which no detector crosses; a custom one that does only costs the
    slow path)."""
    return rules.scanner is not None and rules.may_match("\n".join(texts))
