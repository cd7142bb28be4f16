"""CloudEvents attributes from the family declarations (pure): types, subjects, times,
percent-encoding as the NATS binding says, and nothing for what is not an event."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.decisions.model import Decision
from contracts.families import FAMILIES, event_headers, family_of
from contracts.shared.cloudevents import encode, rfc3339
from contracts.shared.families import Direction
from contracts.shared.ids import new_id
from services.recorder_batch import persisted_event
from tests.factories import decision

pytestmark = pytest.mark.unit

PLAN = new_id()
AT = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)


def test_the_bindings_example_is_encoded_as_it_says() -> None:
    assert encode("Euro \u20ac \U0001f600") == "Euro%20%E2%82%AC%20%F0%9F%98%80"
    assert encode('a"b%c') == "a%22b%25c"
    assert encode("io.decision-ledger.x/y:z") == "io.decision-ledger.x/y:z"


def test_times_are_utc_with_milliseconds() -> None:
    assert rfc3339(AT) == "2026-01-02T03:04:05.678Z"
    east = AT.astimezone(timezone(timedelta(hours=5)))
    assert rfc3339(east) == rfc3339(AT) == rfc3339(AT.replace(tzinfo=None))
    # Written once per time (cached): a naive time and another zone still come out UTC.
    west = AT.replace(tzinfo=timezone(timedelta(hours=-2)))
    assert rfc3339(west) == "2026-01-02T05:04:05.678Z"
    assert rfc3339(AT.replace(tzinfo=None)) == rfc3339(AT)


def test_a_correction_event_names_its_status_and_its_correction() -> None:
    cid = new_id()
    h = event_headers(f"corrections.events.{PLAN}.applied", f"{cid}:applied",
                      json.dumps({"correction_id": cid}).encode(), AT)
    assert h == {
        "ce-specversion": "1.0", "ce-id": f"{cid}:applied",
        "ce-source": "/decision-ledger/corrections",
        "ce-type": "io.decision-ledger.correction.applied.v1",
        "ce-subject": f"plan/{PLAN}/correction/{cid}", "ce-time": "2026-01-02T03:04:05.678Z",
        "ce-datacontenttype": "application/json",
        "ce-dataschema": "http://127.0.0.1:8090/schemas/corrections.events.json"}


def test_a_nested_field_and_a_missing_one() -> None:
    vid = new_id()
    h = event_headers(f"invariants.events.{PLAN}.violated", f"violation:{vid}:violated",
                      json.dumps({"violation": {"violation_id": vid}}).encode(), AT,
                      "https://docs.example/schemas")
    assert h["ce-subject"] == f"plan/{PLAN}/violation/{vid}"
    assert h["ce-type"] == "io.decision-ledger.invariant.violated.v1"
    assert h["ce-dataschema"] == "https://docs.example/schemas/invariants.events.json"
    # A body without the field (or no JSON at all): the plan alone.
    bare = event_headers(f"invariants.events.{PLAN}.violated", "x", b"\xff{", AT)
    assert bare["ce-subject"] == f"plan/{PLAN}"


def test_what_the_producer_knows_fills_the_subject_as_the_body_would() -> None:
    d = Decision.model_validate(decision(PLAN, new_id()) | {"sequence_number": 3})
    e = persisted_event(d)  # the recorder's: one per decision, its decision_id at hand
    read = event_headers(e.subject, e.msg_id, e.payload, AT)
    told = event_headers(e.subject, e.msg_id, e.payload, AT, known=dict(e.known))
    assert told == read and told["ce-subject"] == f"plan/{PLAN}/decision/{d.decision_id}"
    # Only the template's fields are taken, and a subject token is never overridden.
    other = event_headers(f"decisions.persisted.{PLAN}", "x", b"not json", AT,
                          known={"plan_id": "elsewhere", "decision_id": d.decision_id})
    assert other["ce-subject"] == f"plan/{PLAN}/decision/{d.decision_id}"


def test_events_of_two_families_and_two_schema_bases_keep_their_own_constants() -> None:
    cid = new_id()
    a = event_headers(f"corrections.events.{PLAN}.applied", "a", b"{}", AT, "https://a/")
    b = event_headers(f"corrections.events.{PLAN}.failed", "b", b"{}", AT, "https://b")
    c = event_headers(f"decisions.persisted.{PLAN}", cid, b"{}", AT, "https://a/")
    assert (a["ce-type"], b["ce-type"]) == ("io.decision-ledger.correction.applied.v1",
                                            "io.decision-ledger.correction.failed.v1")
    assert (a["ce-dataschema"], b["ce-dataschema"], c["ce-dataschema"]) == (
        "https://a/corrections.events.json", "https://b/corrections.events.json",
        "https://a/decisions.persisted.json")
    assert c["ce-source"] == "/decision-ledger/decisions" and c["ce-id"] == cid
    a["ce-source"] = "changed by a caller"
    again = event_headers(f"corrections.events.{PLAN}.applied", "a", b"{}", AT, "https://a/")
    assert again["ce-source"] == "/decision-ledger/corrections"


def test_inbound_families_and_unknown_subjects_get_nothing() -> None:
    assert event_headers(f"decisions.recorded.{PLAN}", "d", b"{}", AT) == {}
    assert event_headers("nothing.of.ours", "x", b"{}", AT) == {}
    assert event_headers(f"corrections.events.{PLAN}", "x", b"{}", AT) == {}  # a token short
    assert family_of(f"corrections.events.{PLAN}.applied.extra") is None


def test_every_event_family_has_a_type_and_a_source() -> None:
    for f in FAMILIES:
        if f.direction is not Direction.EVENT:
            continue
        subject = f.subject.format(**{t: "X" for t in f.tokens})
        h = event_headers(subject, "id-1", b"{}", AT)
        assert h["ce-type"].startswith("io.decision-ledger.") and h["ce-source"], f.name
        assert family_of(subject) is f


@given(st.text(max_size=300), st.binary(max_size=300))
def test_any_subject_and_body_never_raise_and_every_value_is_header_safe(
        subject: str, payload: bytes) -> None:
    for candidate in (subject, f"corrections.events.{PLAN}.{subject}"):
        for value in event_headers(candidate, "id", payload, AT).values():
            assert all("!" <= c <= "~" for c in value)
