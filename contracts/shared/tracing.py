"""W3C trace context on the bus: what a message may carry, read without trusting it.

An agent's or operator's client puts `traceparent` (and `tracestate`) in the headers of
what it publishes; the workers carry the same context onto the events they publish
about it, so one trace runs from an operator's request to its APPLIED event. Headers
are hostile input like any other: only a well-formed `traceparent` is kept, and a
`tracestate` only beside one, cut at its W3C limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACESTATE_MAX = 512
"""Characters of tracestate kept (the W3C recommendation for what to propagate)."""

_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def trace_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The trace context `headers` carry, if well-formed; {} otherwise. Never raises."""
    if not headers:
        return {}
    parent = headers.get(TRACEPARENT)
    if not isinstance(parent, str) or not _TRACEPARENT.fullmatch(parent) \
            or parent.startswith("ff") or set(parent[3:35]) == {"0"} \
            or set(parent[36:52]) == {"0"}:
        return {}
    out = {TRACEPARENT: parent}
    state = headers.get(TRACESTATE)
    if isinstance(state, str) and state:
        out[TRACESTATE] = state[:TRACESTATE_MAX]
    return out


def trace_id(headers: Mapping[str, str] | None) -> str | None:
    """The 32-hex trace ID of a well-formed traceparent, else None."""
    parent = trace_headers(headers).get(TRACEPARENT)
    return parent[3:35] if parent else None


# --- OpenTelemetry semantic conventions for generative AI agents ----------------------
# The spans and log events the clients and the workers emit follow the GenAI agent
# conventions of OpenTelemetry semantic conventions v1.41.0 (the last release that held
# them before they moved to their own repository; status Development), so a tracing UI
# that reads them (Phoenix, Langfuse, ADK's) shows a plan as an agent invocation and a
# tool_invocation decision as a tool call. Names only here: no OpenTelemetry import, so
# the contracts stay free of it.

GENAI_SEMCONV_VERSION = "1.41.0"
GENAI_SCHEMA_URL = f"https://opentelemetry.io/schemas/{GENAI_SEMCONV_VERSION}"

OPERATION = "gen_ai.operation.name"
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_VERSION = "gen_ai.agent.version"
AGENT_ID = "gen_ai.agent.id"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"

INVOKE_AGENT = "invoke_agent"
EXECUTE_TOOL = "execute_tool"
RECORD_DECISION = "record_decision"
"""Not one of the conventions' operations (none fits recording a choice): a custom
value, as they allow, on the span of every decision that is not a plan or a tool call."""
TOOL_INVOCATION = "tool_invocation"
PROMPT_DEFINITION = "prompt_definition"
ATTRIBUTE_MAX = 128
"""Characters kept of a name taken from a decision (a tool's, an agent's)."""

Attributes = dict[str, str | int | float | bool]


def _part(holder: object, key: str) -> object:
    """`holder.key` or `holder[key]`, or None: a field another version of the model may
    not have (agent and model identity are optional on a Decision)."""
    if isinstance(holder, dict):
        return holder.get(key)
    return getattr(holder, key, None)


def _text(value: object) -> str | None:
    value = getattr(value, "value", value)  # an enum's value
    return value[:ATTRIBUTE_MAX] if isinstance(value, str) and value else None


def identity(decision: object) -> Attributes:
    """The agent and model a decision names, as GenAI attributes (none when it names
    none): `agent = {name, version}`, `model = {provider, name}`."""
    agent, model = _part(decision, "agent"), _part(decision, "model")
    pairs = ((AGENT_NAME, _part(agent, "name")), (AGENT_VERSION, _part(agent, "version")),
             (AGENT_ID, _part(agent, "id")), (PROVIDER, _part(model, "provider")),
             (REQUEST_MODEL, _part(model, "name")))
    return {k: t for k, v in pairs if (t := _text(v)) is not None}


def agent_span(plan_id: str, conversation_id: str | None = None,
               agent: Attributes | None = None) -> tuple[str, Attributes]:
    """The span of a plan run as an agent invocation: `invoke_agent {gen_ai.agent.name}`
    (`invoke_agent` when the agent has no name), its conversation the root plan."""
    attributes: Attributes = {OPERATION: INVOKE_AGENT,
                              CONVERSATION: conversation_id or plan_id,
                              "ledger.plan_id": plan_id, **(agent or {})}
    name = attributes.get(AGENT_NAME)
    return (f"{INVOKE_AGENT} {name}" if name else INVOKE_AGENT), attributes


def decision_span(decision: object, conversation_id: str | None = None
                  ) -> tuple[str, Attributes]:
    """The span of recording one decision: a root prompt_definition is the plan's
    `invoke_agent`, a tool_invocation is `execute_tool {tool}` (the tool is its
    chosen_option, cut; the call ID its decision_id), any other `record_decision
    {decision_type}`. Every one names its conversation (the root plan), its plan and
    decision (`ledger.*`), and the agent and model the decision names."""
    plan_id = str(_part(decision, "plan_id"))
    decision_id = str(_part(decision, "decision_id"))
    kind = _text(_part(decision, "decision_type")) or "decision"
    ids: Attributes = {"ledger.plan_id": plan_id, "ledger.decision_id": decision_id,
                       "ledger.decision_type": kind}
    if kind == PROMPT_DEFINITION:
        name, attributes = agent_span(plan_id, conversation_id, identity(decision))
        return name, {**attributes, **ids}
    attributes = {CONVERSATION: conversation_id or plan_id, **ids, **identity(decision)}
    if kind == TOOL_INVOCATION:
        tool = _text(_part(decision, "chosen_option")) or "tool"
        return f"{EXECUTE_TOOL} {tool}", {OPERATION: EXECUTE_TOOL, TOOL_NAME: tool,
                                          TOOL_CALL_ID: decision_id, **attributes}
    return f"{RECORD_DECISION} {kind}", {OPERATION: RECORD_DECISION, **attributes}
