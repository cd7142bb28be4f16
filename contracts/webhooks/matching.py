"""Which events a webhook gets: patterns over the CloudEvents type's stem.

A webhook subscribes to event types by the stem of their CloudEvents type (what is
between `io.decision-ledger.` and `.v<n>`): `correction.applied`, or every type under a
prefix (`correction.*`, `invariant.*`), or `*` for all. The webhooks' own events are
never delivered to webhooks: a delivery would announce a delivery, without end.
"""

from __future__ import annotations

import re

from contracts.shared.cloudevents import TYPE_PREFIX

PATTERN = re.compile(r"\*|[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?")
MAX_PATTERNS = 32
NEVER = "webhook."
"""The webhooks' own events (webhook.changed, webhook.delivery.*)."""


def check_patterns(patterns: list[str]) -> list[str]:
    """The patterns, deduplicated in order; ValueError naming a bad one."""
    if not patterns:
        raise ValueError("name at least one event type (e.g. correction.applied, "
                         "correction.*, *)")
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(f"at most {MAX_PATTERNS} event types")
    for p in patterns:
        if len(p) > 100 or not PATTERN.fullmatch(p):
            raise ValueError(f"{p[:100]!r} is not an event type or a prefix.* pattern "
                             "(lower case, dot-separated)")
        if p.startswith(NEVER):
            raise ValueError("the webhooks' own events cannot be delivered to webhooks")
    return list(dict.fromkeys(patterns))


def stem(ce_type: str) -> str | None:
    """`correction.applied` of `io.decision-ledger.correction.applied.v1`."""
    if not ce_type.startswith(TYPE_PREFIX):
        return None
    body, _, version = ce_type[len(TYPE_PREFIX):].rpartition(".v")
    return body if body and version.isdigit() else None


def matches(patterns: list[str], ce_type: str) -> bool:
    s = stem(ce_type)
    if s is None or s.startswith(NEVER):
        return False
    return any(p in ("*", s) or (p.endswith(".*") and s.startswith(p[:-1]))
               for p in patterns)
