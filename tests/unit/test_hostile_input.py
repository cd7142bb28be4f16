"""Hostile input: every reader answers any body with a result or named violations, never
an exception, and every report that follows (rejection event, dead letter) stays within
its documented bound (contracts.shared.bounds)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootstrap.settings import Settings
from contracts.corrections import subjects as correction_subjects
from contracts.corrections.refusals import CorrectionRejected
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.corrections.wire import (
    read_cancel,
    read_fail,
    read_request,
    read_retry,
)
from contracts.decisions.subjects import rejected
from contracts.invariants import subjects as invariant_subjects
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import ViolationRejected, read_violation
from contracts.recording.events import DecisionPersisted, DecisionRejected, read_persisted_root
from contracts.recording.message import Candidate, read_message
from contracts.shared.bounds import (
    DEAD_LETTER_MAX_BYTES,
    DEAD_LETTER_PAYLOAD_BYTES,
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_ERRORS,
    MAX_FIELD_BYTES,
    MAX_TEXT_BYTES,
    REJECTION_EVENT_MAX_BYTES,
    clip,
)
from contracts.shared.dead_letter import DeadLetter, Truncated
from contracts.shared.ids import is_ulid, new_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.shared.unreadable import Unreadable
from store.dead_letters import _from_doc, _to_doc
from tests.factories import root

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PLAN = new_id()
DECISION = new_id()
VIOLATION = new_id()
KINDS = ("decision", "request", "dryrun", "cancel", "fail", "retry", "violation", "persisted")


def valid_body(kind: str) -> dict[str, Any]:
    """A body the reader of `kind` accepts, on `subject_of(kind)` with `headers_of`."""
    if kind == "decision":
        return root(PLAN) | {"decision_id": DECISION}
    if kind in ("request", "dryrun"):
        return {"correction_id": new_id(), "plan_id": PLAN, "decision_id": new_id(),
                "mode": "revert", "guidance": "use a token bucket", "requested_by": "alice"}
    if kind == "cancel":
        return {"correction_id": new_id(), "plan_id": PLAN, "reason": "changed my mind"}
    if kind == "fail":
        return {"correction_id": new_id(), "plan_id": PLAN, "reason": "archive volume lost"}
    if kind == "retry":
        return {"correction_id": new_id(), "plan_id": PLAN, "retry_id": new_id(),
                "reason": "volume replaced", "requested_by": "alice"}
    if kind == "violation":
        return {"violation_id": VIOLATION, "invariant_id": new_id(), "plan_id": PLAN,
                "severity": "error", "details": "dropped a table"}
    return {"decision_id": DECISION, "plan_id": PLAN, "sequence_number": 0,
            "decision_type": "prompt_definition", "parent_decision_id": None}


SUBJECTS = {
    "decision": f"decisions.recorded.{PLAN}",
    "request": f"{correction_subjects.REQUESTED_PREFIX}.{PLAN}",
    "dryrun": f"{correction_subjects.DRYRUN_PREFIX}.{PLAN}",
    "cancel": f"{correction_subjects.CANCEL_PREFIX}.{PLAN}",
    "fail": f"{correction_subjects.FAIL_PREFIX}.{PLAN}",
    "retry": f"{correction_subjects.RETRY_PREFIX}.{PLAN}",
    "violation": f"{invariant_subjects.VIOLATIONS_PREFIX}.{PLAN}",
    "persisted": f"decisions.persisted.{PLAN}",
}
HEADERS = {"decision": {"Nats-Msg-Id": DECISION}, "violation": {"Nats-Msg-Id": VIOLATION}}


def read(kind: str, data: bytes, *, subject: str | None = None,
         headers: dict[str, str] | None = None,
         limit: int = DEFAULT_MAX_PAYLOAD_BYTES) -> tuple[RuleViolation, ...]:
    """Read `data` as the worker of `kind` does, check every bound its report keeps, and
    return the violations (empty when the message was accepted)."""
    subject = SUBJECTS[kind] if subject is None else subject
    headers = HEADERS.get(kind, {}) if headers is None else headers
    event: Any = None
    if kind == "decision":
        r = read_message(Inbound(subject, headers, data, 7), NOW, limit)
        if isinstance(r, Candidate):
            return ()
        violations, plan = r.violations, r.plan_id
        event = DecisionRejected(dead_letter_id="DECISIONS:7", subject=subject, plan_id=plan,
                                 decision_id=None, errors=list(violations), rejected_at=NOW)
    elif kind in ("request", "dryrun", "cancel", "fail", "retry"):
        prefix = correction_subjects.DRYRUN_PREFIX if kind == "dryrun" \
            else correction_subjects.REQUESTED_PREFIX
        readers = {"cancel": read_cancel, "fail": read_fail, "retry": read_retry}
        c = readers[kind](subject, data, max_payload_bytes=limit) if kind in readers \
            else read_request(subject, data, prefix, max_payload_bytes=limit)
        if isinstance(c, CorrectionRequest | CancelRequest | FailRequest | RetryRequest):
            return ()
        assert isinstance(c, Unreadable)
        violations, plan = c.violations, c.plan_id
        assert c.message_id is None or is_ulid(c.message_id)
        assert len(c.reason.encode()) <= (MAX_ERRORS + 1) * (MAX_TEXT_BYTES + MAX_FIELD_BYTES + 40)
        event = CorrectionRejected(dead_letter_id="CORRECTIONS:7", subject=subject, plan_id=plan,
                                   correction_id=c.message_id, errors=list(violations),
                                   rejected_at=NOW)
    elif kind == "violation":
        v = read_violation(subject, headers, data, NOW, max_payload_bytes=limit)
        if isinstance(v, InvariantViolation):
            return ()
        assert isinstance(v, Unreadable)
        violations, plan = v.violations, v.plan_id
        event = ViolationRejected(dead_letter_id="INVARIANTS:7", subject=subject, plan_id=plan,
                                  violation_id=v.message_id, errors=list(violations),
                                  rejected_at=NOW)
    else:
        p = read_persisted_root(data, limit)
        if p is None or isinstance(p, DecisionPersisted):
            return ()
        violations, plan = (p,), None
    assert_bounded(violations, plan)
    if event is not None:
        assert len(event.model_dump_json().encode()) <= REJECTION_EVENT_MAX_BYTES
        assert " " not in rejected(plan)  # a subject NATS accepts
    letter = DeadLetter.of_message(id="DECISIONS:7", subject=subject, headers=headers, data=data,
                                   plan_id=plan, decision_id=None, errors=violations,
                                   rejected_at=NOW, delivered=1)
    assert len(bson.encode(_to_doc(letter))) <= DEAD_LETTER_MAX_BYTES
    return violations


def assert_bounded(violations: tuple[RuleViolation, ...], plan: str | None) -> None:
    assert 1 <= len(violations) <= MAX_ERRORS + 1
    for v in violations:
        assert len(v.message.encode()) <= MAX_TEXT_BYTES
        assert v.field is None or len(v.field.encode()) <= MAX_FIELD_BYTES
    assert all(v.rule is not Rule.MORE_ERRORS for v in violations[:-1])
    assert plan is None or is_ulid(plan)


def with_field(kind: str, key: str, fragment: bytes) -> bytes:
    """A valid body of `kind` whose `key` holds the raw JSON `fragment`."""
    body = valid_body(kind) | {key: "\x00PLACEHOLDER\x00"}
    return json.dumps(body).encode().replace(b'"\\u0000PLACEHOLDER\\u0000"', fragment)


# --- hostile bodies ---------------------------------------------------------------------

OPENERS = [b"[", b'{"a":', b'[{"a":', b'{"question":[', b'{"plan_id":{"x":[']
nesting = st.builds(lambda opener, n: opener * (n // len(opener)),
                    st.sampled_from(OPENERS), st.integers(5_000, 100_000))
NUMBERS = [b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity", b"-0", b"-0.0", b"1e-400",
           b"1" * 5000, b"-" + b"9" * 4000, b"9" * 20, b"0.1" + b"1" * 3000]
DATES = ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00",
         "9999-12-31T23:59:59.999999-23:59", "0001-01-01T00:00:00.000001+23:59",
         "0000-01-01T00:00:00Z", "10000-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "", "now",
         "-1", "1e400"]
json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20)
fragments = st.one_of(
    st.sampled_from(NUMBERS),
    st.sampled_from(DATES).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    # huge lists of wrong or right items
    st.builds(lambda item, n: b"[" + b",".join([item] * n) + b"]",
              st.sampled_from([b'"x"', b"1", b"null", b"{}", b"[]", b'"' + new_id().encode()
                               + b'"', b'{"artifact_path":"","artifact_type":1}']),
              st.integers(1_000, 60_000)),
    # huge strings, control characters and lone surrogates
    st.builds(lambda ch, n: json.dumps(ch * n).encode(), st.characters(),
              st.integers(1_000, 200_000)),
    st.sampled_from([b'"\\ud800"', b'"\\u0000\\n\\t"', b'"\\udfff\\ud800x"']),
)
KEYS = ["created_at", "sequence_number", "requested_at", "reported_at", "resolved_at",
        "plan_id", "correction_id", "violation_id", "decision_id", "confidence_score",
        "downstream_decision_ids", "context_snapshot", "question", "guidance", "details",
        "mode", "severity", "decision_type", "unknown", "\ud800", "k" * 50_000, ""]
SUBJECT_VARIANTS = st.sampled_from([None, "decisions.recorded", "x" * 3000,
                                    f"decisions.recorded.{'A' * 3000}", "corrections.requested."])
HEADER_VARIANTS = st.sampled_from([
    None, {}, {"Nats-Msg-Id": "v" * 100_000},
    {f"h{i}": "x" * 2000 for i in range(100)}, {"k" * 5000: "\ud800"}])
HOSTILE = settings(max_examples=40, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("kind", KINDS)
@HOSTILE
@given(data=st.binary(max_size=4096))
def test_random_bytes(kind: str, data: bytes) -> None:
    read(kind, data)


@pytest.mark.parametrize("kind", KINDS)
@HOSTILE
@given(data=nesting, closed=st.booleans())
def test_deep_nesting_is_unreadable_not_an_exception(kind: str, data: bytes,
                                                     closed: bool) -> None:
    if closed:  # well-formed: every bracket closed
        data += b"".join(b"]" if c == ord("[") else b"}" for c in reversed(data)
                         if c in b"[{")
    violations = read(kind, data)
    assert violations or kind == "persisted"  # an event that is no root's is ignored
    if len(data) > DEFAULT_MAX_PAYLOAD_BYTES:
        assert [v.rule for v in violations] == [Rule.PAYLOAD_TOO_LARGE]


@pytest.mark.parametrize("kind", KINDS)
@HOSTILE
@given(key=st.sampled_from(KEYS), fragment=fragments, subject=SUBJECT_VARIANTS,
       headers=HEADER_VARIANTS)
def test_hostile_fields_subjects_and_headers(kind: str, key: str, fragment: bytes,
                                             subject: str | None,
                                             headers: dict[str, str] | None) -> None:
    read(kind, with_field(kind, key, fragment), subject=subject, headers=headers)


@pytest.mark.parametrize("kind", KINDS)
@HOSTILE
@given(body=json_values)
def test_any_json_value_as_the_whole_body(kind: str, body: Any) -> None:
    read(kind, json.dumps(body).encode())


# --- the cases ADR 0011 names -----------------------------------------------------------

@pytest.mark.parametrize("kind", ["decision", "request", "violation"])
@pytest.mark.parametrize("when", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00"])
def test_a_time_with_no_utc_equivalent_is_a_schema_violation_of_its_field(kind: str,
                                                                         when: str) -> None:
    key = {"decision": "created_at", "request": "requested_at", "violation": "reported_at"}
    violations = read(kind, with_field(kind, key[kind], json.dumps(when).encode()))
    assert [(v.rule, v.field) for v in violations] == [(Rule.SCHEMA, key[kind])]
    assert "out of range" in violations[0].message


@pytest.mark.parametrize("kind", KINDS)
def test_five_kilobytes_of_brackets_is_unreadable(kind: str) -> None:
    violations = read(kind, b"[" * 5000)
    assert [v.rule for v in violations] == [Rule.UNREADABLE]
    assert "too deeply" in violations[0].message


def test_twelve_thousand_bad_ids_make_twenty_errors_and_a_count() -> None:
    data = with_field("decision", "downstream_decision_ids",
                      json.dumps(["bad"] * 12_000).encode())
    assert len(data) > 60_000
    violations = read("decision", data)
    assert len(violations) == MAX_ERRORS + 1
    assert {v.rule for v in violations[:-1]} == {Rule.VALID_ULID}
    assert violations[-1].rule is Rule.MORE_ERRORS
    assert "11980 more" in violations[-1].message and "valid_ulid x11980" in \
        violations[-1].message


@pytest.mark.parametrize("kind", KINDS)
def test_at_the_limit_is_read_and_one_byte_over_is_refused_unread(kind: str) -> None:
    limit = 4096
    data = json.dumps(valid_body(kind)).encode()
    at_limit = data + b" " * (limit - len(data))  # JSON allows trailing whitespace
    assert len(at_limit) == limit
    assert read(kind, at_limit, limit=limit) == ()
    over = read(kind, at_limit + b" ", limit=limit)
    assert [v.rule for v in over] == [Rule.PAYLOAD_TOO_LARGE]
    assert f"{limit + 1} bytes" in over[0].message


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("garbage", [b"[" * 1_000_000, b"\xff" * 1_000_000,
                                     b'{"a":' * 200_000])
def test_a_megabyte_of_garbage_is_refused_by_its_size_before_parsing(kind: str,
                                                                     garbage: bytes) -> None:
    # Parsing would have named another rule (unreadable, not_utf8): only the size is checked.
    assert [v.rule for v in read(kind, garbage)] == [Rule.PAYLOAD_TOO_LARGE]


@pytest.mark.parametrize("kind", ["decision", "request", "violation"])
def test_unknown_keys_by_the_thousand_are_counted_not_listed(kind: str) -> None:
    body = valid_body(kind) | {f"extra_{i}": i for i in range(10_000)}
    violations = read(kind, json.dumps(body).encode())
    assert violations[-1].rule is Rule.MORE_ERRORS


def test_valid_messages_still_pass() -> None:
    for kind in KINDS:
        assert read(kind, json.dumps(valid_body(kind)).encode()) == (), kind


# --- the pieces ----------------------------------------------------------------------------

@given(text=st.text() | st.builds(lambda c, n: c * n, st.characters(), st.integers(0, 5000)),
       limit=st.integers(10, 400))
def test_clip_fits_any_text_in_its_bytes(text: str, limit: int) -> None:
    out = clip(text, limit)
    assert len(out.encode("utf-8")) <= limit  # encodable: no lone surrogate survives
    assert out.isprintable() or not any(ord(c) < 0x20 for c in out)
    assert clip(out, limit) == out


def test_clip_leaves_short_clean_text_alone() -> None:
    assert clip("plan_id must be a ULID") == "plan_id must be a ULID"
    assert clip("x" * 400, 100).endswith("…")


def test_violations_lists_the_first_and_counts_the_rest_by_rule() -> None:
    found = Violations(limit=2)
    for rule in [Rule.SCHEMA, Rule.VALID_ULID, Rule.VALID_ULID, Rule.SCHEMA, Rule.VALID_ULID]:
        found.add(RuleViolation(rule=rule, message="m"))
    result = found.result()
    assert [v.rule for v in result] == [Rule.SCHEMA, Rule.VALID_ULID, Rule.MORE_ERRORS]
    assert result[-1].message == "and 3 more not listed (valid_ulid x2, schema x1)"


def test_an_event_built_by_hand_is_cut_like_a_read_one() -> None:
    errors = [RuleViolation(rule=Rule.SCHEMA, field="f" * 1000, message="m" * 10_000)] * 500
    event = DecisionRejected(dead_letter_id="DECISIONS:1", subject="s" * 10_000, plan_id=None,
                             decision_id="d" * 10_000, errors=errors, rejected_at=NOW)
    assert len(event.errors) == MAX_ERRORS + 1
    assert len(event.model_dump_json()) <= REJECTION_EVENT_MAX_BYTES


def letter(data: bytes, **kw: Any) -> DeadLetter:
    return DeadLetter.of_message(
        id="DECISIONS:1", subject=kw.get("subject", "decisions.recorded.x"),
        headers=kw.get("headers", {"Nats-Msg-Id": "x"}), data=data, plan_id=None,
        decision_id=None, errors=[RuleViolation(rule=Rule.SCHEMA, message="m")],
        rejected_at=NOW, delivered=1)


def test_a_dead_letter_keeps_a_small_payload_whole() -> None:
    dl = letter(b"{}")
    assert dl.payload == b"{}" and dl.payload_size == 2 and not dl.truncated
    assert dl.payload_sha256 == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def test_a_dead_letter_keeps_the_head_size_and_hash_of_a_large_payload() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    dl = letter(data, subject="s" * 10_000,
                headers={f"Nats-Expected-H{i}": "v" * 5000 for i in range(50)})
    assert dl.payload == data[:DEAD_LETTER_PAYLOAD_BYTES] and dl.payload_size == len(data)
    assert dl.truncated == [Truncated.PAYLOAD, Truncated.HEADERS, Truncated.SUBJECT]
    assert dl.payload_truncated
    assert len(bson.encode(_to_doc(dl))) <= DEAD_LETTER_MAX_BYTES
    assert _from_doc(_to_doc(dl)) == dl


def test_a_dead_letter_kept_before_sizes_were_recorded_still_loads() -> None:
    old = {"_id": "DECISIONS:1", "subject": "s", "headers": {}, "payload": b"abc",
           "errors": [], "rejected_at": NOW, "delivered": 1}
    dl = _from_doc(old)
    assert dl.payload_size == 3 and not dl.truncated and len(dl.payload_sha256) == 64


def test_the_worst_report_of_each_kind_is_within_its_stated_bound() -> None:
    """Every echoed text at its longest, in the characters that cost most (4-byte UTF-8
    in BSON, `"` escaped in JSON): the bounds in contracts.shared.bounds hold with room."""
    emoji, quote = "\U0001F600", '"'
    errors = [RuleViolation(rule=Rule.SEQUENCE_ASSIGNED_BY_RECORDER, field=emoji * 100,
                            message=emoji * 1000)] * 30
    dl = DeadLetter.of_message(
        id="DECISIONS:18446744073709551615", subject=emoji * 5000,
        headers={**{f"nats-expected-{i}{emoji * 600}": emoji * 600 for i in range(40)},
                 **{f"{i}{emoji * 600}": emoji * 600 for i in range(40)}}, data=b"x" * 10**6,
        plan_id="p" * 1000, decision_id="d" * 1000, errors=errors, rejected_at=NOW,
        delivered=10**9)
    assert len(bson.encode(_to_doc(dl))) <= DEAD_LETTER_MAX_BYTES
    quoted = [RuleViolation(rule=Rule.SEQUENCE_ASSIGNED_BY_RECORDER, field=quote * 200,
                            message=quote * 1000)] * 30
    for event in (
        DecisionRejected(dead_letter_id=quote * 1000, subject=quote * 1000,
                         plan_id=quote * 1000, decision_id=quote * 1000, errors=quoted,
                         rejected_at=NOW),
        CorrectionRejected(dead_letter_id=quote * 1000, subject=quote * 1000,
                           plan_id=quote * 1000, correction_id=quote * 1000, errors=quoted,
                           rejected_at=NOW),
        ViolationRejected(dead_letter_id=quote * 1000, subject=quote * 1000,
                          plan_id=quote * 1000, violation_id=quote * 1000, errors=quoted,
                          rejected_at=NOW),
    ):
        assert len(event.model_dump_json().encode()) <= REJECTION_EVENT_MAX_BYTES


def test_max_payload_bytes_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env().max_payload_bytes == DEFAULT_MAX_PAYLOAD_BYTES
    monkeypatch.setenv("MAX_PAYLOAD_BYTES", "1024")
    assert Settings.from_env().max_payload_bytes == 1024
