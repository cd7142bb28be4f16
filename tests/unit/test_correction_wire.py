"""Reading correction requests and cancels off the wire: every way one is unreadable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts.corrections.requests import CancelRequest, CorrectionRequest, RetryRequest
from contracts.corrections.wire import read_cancel, read_request, read_retry
from contracts.shared.rules import Rule
from contracts.shared.unreadable import Unreadable

pytestmark = pytest.mark.unit

PLAN = "01JD7X4Q9R8N2V5K3M6P1T0W7Y"
TARGET = "01JD7X4Q9R8N2V5K3M6P1T0W7Z"
CID = "01JD7X4Q9R8N2V5K3M6P1T0W80"


def body(**over: Any) -> bytes:
    fields = {"correction_id": CID, "plan_id": PLAN, "decision_id": TARGET, "mode": "revert",
              "guidance": "use a token bucket", "requested_by": "alice"} | over
    return json.dumps({k: v for k, v in fields.items() if v is not None}).encode()


def rules(r: object) -> set[Rule]:
    assert isinstance(r, Unreadable)
    return {v.rule for v in r.violations}


def test_a_valid_request() -> None:
    r = read_request(f"corrections.requested.{PLAN}", body())
    assert isinstance(r, CorrectionRequest) and r.correction_id == CID


@pytest.mark.parametrize(("data", "rule"), [
    (b"\xff\xfe", Rule.NOT_UTF8),
    (b"{nope", Rule.NOT_JSON),
    (b"[1, 2]", Rule.SCHEMA),
    (body(correction_id=None), Rule.SCHEMA),
    (body(mode="rewind"), Rule.SCHEMA),
    (body(guidance="   "), Rule.NON_EMPTY),
    (body(guidance="x" * 10_001), Rule.SCHEMA),
    (body(decision_id="nope"), Rule.VALID_ULID),
    (body(plan_id="01JD7X4Q9R8N2V5K3M6P1T0W81"), Rule.SUBJECT_MATCHES_PLAN),
])
def test_unreadable_requests_name_the_rule(data: bytes, rule: Rule) -> None:
    assert rule in rules(read_request(f"corrections.requested.{PLAN}", data))


def test_unreadable_keeps_what_it_could_read() -> None:
    r = read_request(f"corrections.requested.{PLAN}", body(mode="rewind"))
    assert isinstance(r, Unreadable) and r.plan_id == PLAN and r.message_id == CID
    assert "mode" in r.reason


def test_dry_run_prefix_and_cancel() -> None:
    assert isinstance(read_request(f"corrections.dryrun.{PLAN}", body(),
                                   prefix="corrections.dryrun"), CorrectionRequest)
    ok = read_cancel(f"corrections.cancel.{PLAN}",
                     json.dumps({"correction_id": CID, "plan_id": PLAN}).encode())
    assert isinstance(ok, CancelRequest)
    assert Rule.SUBJECT_MATCHES_PLAN in rules(read_cancel(
        "corrections.cancel.01JD7X4Q9R8N2V5K3M6P1T0W81",
        json.dumps({"correction_id": CID, "plan_id": PLAN}).encode()))



def test_a_revert_without_guidance_is_readable_an_append_is_not() -> None:
    """The specified revert carries no guidance (ADR 0017); the model fills in the default."""
    subject = f"corrections.requested.{PLAN}"
    r = read_request(subject, body(guidance=None))
    assert isinstance(r, CorrectionRequest)
    assert r.guidance == f"Revert of decision {TARGET} requested by alice"
    assert Rule.SCHEMA in rules(read_request(subject, body(guidance=None, mode="append")))
    assert Rule.SCHEMA in rules(read_request(subject, body(guidance=123)))
    # No operator to name: the default is not made up, the request is refused.
    assert rules(read_request(subject, body(guidance=None, requested_by=" "))) & {
        Rule.SCHEMA, Rule.NON_EMPTY}


def test_retry_requests() -> None:
    rid = "01JD7X4Q9R8N2V5K3M6P1T0W81"
    ok = read_retry(f"corrections.retry.{PLAN}", json.dumps(
        {"correction_id": CID, "plan_id": PLAN, "retry_id": rid}).encode())
    assert isinstance(ok, RetryRequest) and ok.retry_id == rid and ok.requested_by is None
    # Without its retry_id a redelivery could not be recognised: refused.
    assert Rule.SCHEMA in rules(read_retry(f"corrections.retry.{PLAN}", json.dumps(
        {"correction_id": CID, "plan_id": PLAN}).encode()))
    assert Rule.SUBJECT_MATCHES_PLAN in rules(read_retry(
        "corrections.retry.01JD7X4Q9R8N2V5K3M6P1T0W81",
        json.dumps({"correction_id": CID, "plan_id": PLAN, "retry_id": rid}).encode()))
    assert Rule.SCHEMA in rules(read_retry(f"corrections.retry.{PLAN}", json.dumps(
        {"correction_id": CID, "plan_id": PLAN, "retry_id": rid, "reason": "x" * 1001}
    ).encode()))
