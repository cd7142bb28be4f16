"""What an erasure removes from a record, and what it keeps (ADR 0034).

An erasure removes free text: a decision's question, choice, alternatives, rationale,
reasoning, correction reason, context references, artifact paths and tool arguments; a
correction's guidance and the choice it copied; a child plan's guidance. It keeps
everything the tree and the audit stand on: IDs, types, links, sequence numbers, times,
signatures and digests. A removed value becomes `ERASED` (a required text), None (an
optional one), an empty list or object; the record keeps, in `erased.fields`, the chain
digest of each value it removed (contracts.trust.chain), so its chain link verifies as
before and every reader shows the placeholder where the text was.

Erasing twice keeps the first digests (the second would digest the placeholder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.trust.chain import field_digests

ERASED = "(erased)"

DECISION_TEXT = ("question", "chosen_option", "alternatives_considered", "rationale",
                 "actor_reasoning", "correction_reason", "context_snapshot",
                 "artifacts_produced", "tool")
CORRECTION_TEXT = ("guidance", "chosen_option")


def _snapshot(value: Mapping[str, Any]) -> dict[str, Any]:
    resources = value.get("relevant_resources")
    return {"hot_context_hash": value.get("hot_context_hash"), "hot_context_ref": ERASED,
            "relevant_resources": [{"resource_id": ERASED, "path": None}
                                   for _ in resources or []],
            "actor_state_ref": None}


def _blank(name: str, value: Any) -> Any:
    """The placeholder for one field's value (shape kept where readers need it)."""
    if name in ("question", "chosen_option", "guidance", "details"):
        return ERASED
    if name == "alternatives_considered":
        return []
    if name == "context_snapshot" and isinstance(value, Mapping):
        return _snapshot(value)
    if name == "artifacts_produced" and isinstance(value, list):
        return [{"artifact_path": ERASED, "artifact_type": a.get("artifact_type", "file")}
                for a in value if isinstance(a, Mapping)]
    if name == "tool" and isinstance(value, Mapping):
        return {"name": value.get("name"), "arguments": {}}
    return None


def erasure_update(doc: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The `$set` that erases `fields` of a stored record (nothing there: not set), with
    `erased.fields` holding each removed value's digest (one erased before: kept)."""
    before = doc.get("erased")
    kept: dict[str, str] = {}
    if isinstance(before, Mapping) and isinstance(before.get("fields"), Mapping):
        kept = {str(k): str(v) for k, v in before["fields"].items()}
    update: dict[str, Any] = {}
    for name in fields:
        if name not in doc or name in kept:
            continue
        value = doc[name]
        blank = _blank(name, value)
        if blank == value:
            continue
        update[name] = blank
        kept[name] = field_digests({name: value})[name]
    if update:
        update["erased.fields"] = kept
        update |= _tokens_left(doc)
    return update


KEPT_FACETS = ("type:", "agent:")
"""Search tokens an erasure keeps (contracts.decisions.search): the decision's type and
its verified agent. Its words and artifact paths go with its text, so no search finds
it by what was erased."""


def _tokens_left(doc: Mapping[str, Any]) -> dict[str, Any]:
    tokens = doc.get("search_tokens")
    if not isinstance(tokens, list):
        return {}
    return {"search_tokens": [t for t in tokens
                              if isinstance(t, str) and t.startswith(KEPT_FACETS)]}


def erased_names(doc: Mapping[str, Any]) -> list[str]:
    """The fields an erasure removed from this record (none: [])."""
    erased = doc.get("erased")
    fields = erased.get("fields") if isinstance(erased, Mapping) else None
    return sorted(fields) if isinstance(fields, Mapping) else []
