"""Redacting a decision's free text before the recorder stores it.

The fields redacted are the agent's words and references: `question`, `chosen_option`,
`alternatives_considered`, `rationale`, `actor_reasoning`, `correction_reason`, the
context snapshot's references (`hot_context_ref`, `actor_state_ref`, each relevant
resource's `resource_id` and `path`), each artifact's `artifact_path` and a tool call's
`arguments`. IDs, types, links, numbers and times are never touched, so the tree is the
same tree.

What the record keeps (ADR 0034): the redacted text, and `redactions` = the (field,
rule, count) of every replacement, never the value. The message's signature keeps the
digest of every field as sent, so it verifies as before; the record's chain link is
computed over the record as stored, redactions included.

Cost: the common decision holds nothing to redact, and pays one scan over its strings
joined (`any_match`); only a hit walks field by field and rebuilds the model.
"""

from __future__ import annotations

from typing import Any

from contracts.decisions.model import Decision
from contracts.redaction.rules import Rules
from contracts.redaction.text import Mark, Marks, any_match, redact_value, strings

TEXT_FIELDS = ("question", "chosen_option", "alternatives_considered", "rationale",
               "actor_reasoning", "correction_reason")
MODEL_FIELDS = ("context_snapshot", "artifacts_produced", "tool")
"""Nested models whose strings are free text (their JSON form is redacted, then read
back into the model)."""


def _texts(d: Decision) -> list[str]:
    out = [d.question, d.chosen_option, *d.alternatives_considered]
    out += [t for t in (d.rationale, d.actor_reasoning, d.correction_reason) if t]
    snap = d.context_snapshot
    out.append(snap.hot_context_ref)
    if snap.actor_state_ref:
        out.append(snap.actor_state_ref)
    for r in snap.relevant_resources:
        out.append(r.resource_id)
        if r.path:
            out.append(r.path)
    out += [a.artifact_path for a in d.artifacts_produced]
    if d.tool is not None:
        strings(d.tool.arguments, out)
    return out


def redact_decision(rules: Rules, d: Decision) -> tuple[Decision, tuple[Mark, ...]]:
    """The decision with its free text redacted, and what was (no marks: `d` itself)."""
    if rules.scanner is None or not any_match(rules, _texts(d)):
        return d, ()
    marks = Marks()
    update: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = getattr(d, name)
        if value is not None:
            new = redact_value(rules, value, name, marks)
            if new != value:
                update[name] = new
    for name in MODEL_FIELDS:
        model = getattr(d, name)
        if model is None:
            continue
        plain = model.model_dump(mode="json") if name != "artifacts_produced" else [
            a.model_dump(mode="json") for a in model]
        new = redact_value(rules, plain, name, marks)
        if new != plain:
            update[name] = _rebuilt(d, name, new)
    if not marks:
        return d, ()
    return d.model_copy(update=update), marks.result()


def _rebuilt(d: Decision, name: str, value: Any) -> Any:
    """The nested model again from its redacted JSON (no validation: a placeholder may be
    a little longer than what it replaced, and what was sent was valid)."""
    if name == "artifacts_produced":
        kind = type(d.artifacts_produced[0])
        return [kind.model_construct(**item) for item in value]
    current = getattr(d, name)
    if name == "context_snapshot":
        resources = [type(r).model_construct(**item) for r, item in
                     zip(current.relevant_resources, value["relevant_resources"], strict=True)]
        return type(current).model_construct(**{**value, "relevant_resources": resources})
    return type(current).model_construct(**value)


def marks_document(marks: tuple[Mark, ...]) -> list[dict[str, Any]]:
    """The `redactions` a stored record keeps."""
    return [m.as_document() for m in marks]
