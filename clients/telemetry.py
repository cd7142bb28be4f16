"""The clients' spans, per OpenTelemetry's GenAI agent conventions (contracts.shared.tracing).

A plan run is an `invoke_agent` span: `invoke_agent(plan_id, ...)` around the run (the
LangGraph integration opens it around each graph run), and every decision recorded
inside it is its child: `execute_tool {tool}` for a tool_invocation, `record_decision
{type}` for any other. Without one, recording a plan's root is itself a short
`invoke_agent` span, and every span names the plan's conversation
(`gen_ai.conversation.id`, the root plan), which is how tracing UIs group a plan's
spans when they are not in one trace.

Only the OpenTelemetry API is used: with no SDK configured every span is a no-op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from opentelemetry import trace

from contracts.shared.tracing import (
    GENAI_SCHEMA_URL,
    PROMPT_DEFINITION,
    RECORD_DECISION,
    Attributes,
    agent_span,
    decision_span,
    identity,
)

TRACER = "decision_ledger.clients"
_tracer = trace.get_tracer(TRACER, schema_url=GENAI_SCHEMA_URL)
_running: ContextVar[str | None] = ContextVar("decision_ledger_agent_plan", default=None)
"""The plan whose `invoke_agent` span is current, if any."""


class Conversations:
    """Which root plan each plan belongs to, as far as this client saw it: a child
    plan's root names its parent (`parent_plan_id`), whose conversation it joins."""

    def __init__(self) -> None:
        self._of: dict[str, str] = {}

    def of(self, plan_id: str) -> str:
        return self._of.get(plan_id, plan_id)

    def learn(self, decision: object) -> str:
        plan_id = str(getattr(decision, "plan_id", ""))
        parent = getattr(decision, "parent_plan_id", None)
        if isinstance(parent, str) and parent and plan_id not in self._of:
            self._of[plan_id] = self.of(parent)
        return self.of(plan_id)


@contextlib.contextmanager
def invoke_agent(plan_id: str, *, conversation_id: str | None = None,
                 agent: object = None, model: object = None) -> Iterator[trace.Span]:
    """The `invoke_agent` span of one run of a plan; what is recorded inside is its
    child. `agent` and `model` as a decision names them (`{name, version}`,
    `{provider, name}`), an object or a dict."""
    extra: Attributes = identity({"agent": agent, "model": model})
    name, attributes = agent_span(plan_id, conversation_id, extra)
    token = _running.set(plan_id)
    try:
        with _tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span
    finally:
        _running.reset(token)


@contextlib.contextmanager
def recording(decision: object, conversation_id: str) -> Iterator[trace.Span]:
    """The span of publishing one decision. A root inside its plan's own `invoke_agent`
    span is a `record_decision` (the run is the agent span already)."""
    name, attributes = decision_span(decision, conversation_id)
    if name.startswith("invoke_agent") and _running.get() == getattr(decision, "plan_id", None):
        name = f"{RECORD_DECISION} {PROMPT_DEFINITION}"
        attributes = {**attributes, "gen_ai.operation.name": RECORD_DECISION}
    with _tracer.start_as_current_span(name, attributes=attributes) as span:
        yield span
