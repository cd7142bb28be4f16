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
from contracts.shared.tracing import TRACESTATE_MAX, trace_headers, trace_id

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
