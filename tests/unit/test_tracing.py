"""The trace context a message carries is read without trusting it (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.shared.ids import new_id
from contracts.shared.tracing import (
    TRACESTATE_MAX,
    agent_span,
    decision_span,
    trace_headers,
    trace_id,
)

pytestmark = pytest.mark.unit

GOOD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_well_formed_context_is_kept_and_nothing_else() -> None:
    headers = {"traceparent": GOOD, "tracestate": "k=v", "Nats-Msg-Id": "x", "evil": "y"}
    assert trace_headers(headers) == {"traceparent": GOOD, "tracestate": "k=v"}
    assert trace_id(headers) == "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("parent", [
    "", "garbage", GOOD.upper(), GOOD + "-00", " " + GOOD, GOOD.replace("-", "_"),
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff is invalid
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
    "00-" + "a" * 10_000, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0\n",
])
def test_a_malformed_traceparent_is_dropped_with_its_tracestate(parent: str) -> None:
    assert trace_headers({"traceparent": parent, "tracestate": "k=v"}) == {}
    assert trace_id({"traceparent": parent}) is None


def test_a_huge_tracestate_is_cut_and_missing_headers_are_nothing() -> None:
    kept = trace_headers({"traceparent": GOOD, "tracestate": "k=" + "v" * 100_000})
    assert len(kept["tracestate"]) == TRACESTATE_MAX
    assert trace_headers(None) == trace_headers({}) == trace_headers({"tracestate": "k"}) == {}


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=200), max_size=8))
def test_any_headers_are_read_without_raising(headers: dict[str, str]) -> None:
    out = trace_headers(headers)
    assert set(out) <= {"traceparent", "tracestate"}


def test_a_correction_keeps_only_a_well_formed_context_of_its_request() -> None:
    request = CorrectionRequest(plan_id=new_id(), decision_id=new_id(),
                                mode=CorrectionMode.REVERT, guidance="g", requested_by="a")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    kept = Correction.from_request(request, at, trace={"traceparent": GOOD, "x": "y"})
    assert kept.trace_context == {"traceparent": GOOD}
    dropped = Correction.from_request(request, at, trace={"traceparent": "[[[[" * 1000})
    assert dropped.trace_context == {}


class _Agent:
    name = "billing-agent"
    version = "2.0"


def test_a_decisions_span_follows_the_genai_agent_conventions() -> None:
    plan, did = new_id(), new_id()
    name, attrs = decision_span({"plan_id": plan, "decision_id": did,
                                 "decision_type": "tool_invocation",
                                 "chosen_option": "pytest " + "x" * 500,
                                 "agent": _Agent(), "model": {"provider": "openai",
                                                              "name": "gpt-x"}}, "ROOT")
    assert name == "execute_tool pytest " + "x" * 121  # the tool name cut at 128
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert (attrs["gen_ai.tool.call.id"], attrs["gen_ai.conversation.id"]) == (did, "ROOT")
    assert (attrs["gen_ai.agent.name"], attrs["gen_ai.agent.version"]) == ("billing-agent",
                                                                           "2.0")
    assert (attrs["gen_ai.provider.name"], attrs["gen_ai.request.model"]) == ("openai",
                                                                              "gpt-x")
    root, root_attrs = decision_span({"plan_id": plan, "decision_id": did,
                                      "decision_type": "prompt_definition"})
    assert (root, root_attrs["gen_ai.operation.name"]) == ("invoke_agent", "invoke_agent")
    assert root_attrs["gen_ai.conversation.id"] == plan and "gen_ai.agent.name" not in root_attrs
    other, other_attrs = decision_span({"plan_id": plan, "decision_id": did,
                                        "decision_type": "strategy_choice", "agent": None,
                                        "model": {"name": 7}})
    assert other == "record_decision strategy_choice"
    assert "gen_ai.request.model" not in other_attrs  # not a string: left out


def test_an_agent_span_is_named_after_its_agent() -> None:
    assert agent_span("P", "C", {"gen_ai.agent.name": "a"})[0] == "invoke_agent a"
    assert agent_span("P")[1]["gen_ai.conversation.id"] == "P"
