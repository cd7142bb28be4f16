"""Redaction rules: each detector finds its kind among ordinary text and leaves look-alikes
alone, a decision's free text is redacted field by field with marks that never hold the
value, hostile text costs bounded work, and a bad operator pattern stops the start."""

from __future__ import annotations

import time

import pytest

from contracts.decisions.model import Decision
from contracts.redaction.decisions import redact_decision
from contracts.redaction.letters import redact_letter
from contracts.redaction.rules import Rules, luhn
from contracts.redaction.text import Marks, redact_text
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.timestamps import utc_now
from tests.factories import decision, root

RULES = Rules.configured(None, {"customer": r"CUST-[0-9]{6}"})

FOUND = [
    ("api_key", "use sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12 for it"),
    ("api_key", "token ghp_" + "a1B2" * 9 + " was pasted"),
    ("api_key", "AWS AKIAIOSFODNN7EXAMPLE in the env"),
    ("api_key", "slack xoxb-123456789012-abcdefABCDEF here"),
    ("jwt", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
            "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("email", "write to jane.doe+billing@example.co.uk today"),
    ("card", "card 4111 1111 1111 1111, exp 12/29"),
    ("card", "card 5500-0000-0000-0004"),
    ("card", "paid with 4111111111111111."),
    ("customer", "the account CUST-004211 asked"),
]
LEFT = [
    "plain words about a rate limiter",
    "order 4111 1111 1111 1112 fails Luhn",
    "timestamp 20260101120000123",
    "an @mention and a user@localhost",
    "task-sk-short and skeleton keys",
    "eyJ alone is not a token",
    # Luhn-valid digit groups inside identifiers: a UUID (this one's "5-7364-6483-8667"
    # passes Luhn), a LangGraph checkpoint reference, a hash, a slug.
    "1f1eecd5-7364-6483-8667-864918861462",
    "langgraph:01M8X0GH0H4R4KVXCEGFGZN0A2:1f1eecd5-7364-6483-8667-864918861462",
    "sha256:ab4111111111111111cd",
    "build-4111111111111111-x",
]


@pytest.mark.parametrize(("rule", "text"), FOUND)
def test_each_detector_finds_its_kind(rule: str, text: str) -> None:
    marks = Marks()
    out = redact_text(RULES, text, "rationale", marks)
    assert f"[redacted:{rule}]" in out
    assert [(m.field, m.rule) for m in marks.result()] == [("rationale", rule)]


@pytest.mark.parametrize("text", LEFT)
def test_look_alikes_are_left(text: str) -> None:
    marks = Marks()
    assert redact_text(RULES, text, "rationale", marks) == text
    assert not marks


def test_luhn() -> None:
    assert luhn("4111111111111111") and not luhn("4111111111111112")


def test_a_decision_is_redacted_field_by_field_and_marks_hold_no_value() -> None:
    top = root()
    d = Decision.model_validate(decision(
        top["plan_id"], top["decision_id"], "tool_invocation",
        question="mail ops@example.com?", rationale="key sk-ant-" + "x" * 30,
        actor_reasoning="nothing here", alternatives_considered=["a", "card 4111111111111111"],
        context_snapshot={"hot_context_hash": "sha256:" + "0" * 64,
                          "hot_context_ref": "s3://ctx/jane@example.com.json",
                          "relevant_resources": [{"resource_id": "r",
                                                  "path": "AKIAIOSFODNN7EXAMPLE"}]},
        tool={"name": "shell", "arguments": {"cmd": "curl -H 'x: xoxp-1234567890-abc'"}}))
    out, marks = redact_decision(RULES, d)
    found = {(m.field, m.rule) for m in marks}
    assert found == {("question", "email"), ("rationale", "api_key"),
                     ("alternatives_considered[1]", "card"),
                     ("context_snapshot.hot_context_ref", "email"),
                     ("context_snapshot.relevant_resources[0].path", "api_key"),
                     ("tool.arguments.cmd", "api_key")}
    dumped = out.model_dump_json()
    for secret in ("ops@example.com", "sk-ant-", "4111111111111111", "jane@", "AKIA", "xoxp"):
        assert secret not in dumped
    assert str(marks).count("example") == 0
    assert out.actor_reasoning == "nothing here" and out.decision_id == d.decision_id
    plain = Decision.model_validate(root())
    assert redact_decision(RULES, plain) == (plain, ())


def test_a_checkpoint_reference_comes_back_as_it_was_sent() -> None:
    """A resume parses actor_state_ref: a UUID whose digit groups pass Luhn (0.58 % of
    100,000 LangGraph checkpoint IDs made as a run makes them, `uuid6(clock_seq=step)`)
    once came back as `...:[redacted:card]...`, and the resumed
    run forked from a checkpoint that does not exist."""
    top = root()
    ref = "langgraph:01M8X0GH0H4R4KVXCEGFGZN0A2:1f1eecd5-7364-6483-8667-864918861462"
    d = Decision.model_validate(decision(
        top["plan_id"], top["decision_id"], "strategy_choice",
        context_snapshot={"hot_context_hash": "sha256:" + "0" * 64,
                          "hot_context_ref": "langgraph:state", "actor_state_ref": ref,
                          "relevant_resources": []}))
    assert redact_decision(RULES, d) == (d, ())


def test_a_dead_letters_payload_is_redacted_whatever_it_is() -> None:
    data = b'{"question": "jane@example.com", "bad": "\xff\xfe"} AKIAIOSFODNN7EXAMPLE'
    letter = DeadLetter.of_message(id="DECISIONS:1", subject="decisions.recorded.x",
                                   headers={}, data=data, plan_id=None, decision_id=None,
                                   errors=[], rejected_at=utc_now(), delivered=1)
    kept = redact_letter(RULES, letter)
    assert b"jane@" not in kept.payload and b"AKIA" not in kept.payload
    assert b"\xff\xfe" in kept.payload  # bytes that are not UTF-8 pass through
    assert kept.payload_size == len(data)
    assert {r["rule"] for r in kept.redactions} == {"email", "api_key"}


def test_hostile_text_costs_bounded_work() -> None:
    hostile = ["a" * 200_000 + "@", "1 " * 100_000, "eyJ" + "A" * 200_000, "sk-" * 60_000]
    for text in hostile:
        started = time.process_time()
        redact_text(RULES, text, "rationale", Marks())
        assert time.process_time() - started < 5  # catastrophic backtracking would not end


@pytest.mark.parametrize(("detectors", "patterns", "words"), [
    ("api_key,nope", {}, "unknown detector 'nope'"),
    (None, {"Bad Name": "x"}, "name 'Bad Name'"),
    (None, {"broken": "("}, "broken:"),
    (None, {"empty": "x*"}, "matches the empty text"),
])
def test_bad_settings_are_one_line(detectors: str | None, patterns: dict[str, str],
                                   words: str) -> None:
    with pytest.raises(ValueError, match="REDACTION_") as caught:
        Rules.configured(detectors, patterns)
    assert words in str(caught.value)


def test_off_redacts_nothing() -> None:
    marks = Marks()
    assert redact_text(Rules.off(), "jane@example.com", "q", marks) == "jane@example.com"
    assert not marks
