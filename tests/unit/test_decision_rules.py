"""Every specified validation rule (ADR 0001), broken once each, yields an error naming
the rule and field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.decisions.artifacts import STORED
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule, violations_from
from tests.factories import decision, root

pytestmark = pytest.mark.unit


def broken(d: dict[str, Any]) -> set[tuple[Rule, str | None]]:
    d.pop("sequence_number", None)
    with pytest.raises(ValidationError) as exc:
        Decision.model_validate(d)
    return {(v.rule, v.field) for v in violations_from(exc.value)}


def child(**fields: Any) -> dict[str, Any]:
    d = decision(new_id(), new_id())
    d.update(fields)
    return d


@pytest.mark.parametrize(("fields", "rule", "field"), [
    ({"plan_id": "not-a-ulid"}, Rule.VALID_ULID, "plan_id"),
    ({"decision_id": "01ARZ3NDEKTSV4RRFFQ69G5FA"}, Rule.VALID_ULID, "decision_id"),
    ({"parent_decision_id": "xyz"}, Rule.VALID_ULID, "parent_decision_id"),
    ({"superseded_by": "I" * 26}, Rule.VALID_ULID, "superseded_by"),
    ({"is_correction": True, "corrects_decision_id": "nope"}, Rule.VALID_ULID,
     "corrects_decision_id"),
    ({"confidence_score": 1.01}, Rule.CONFIDENCE_RANGE, "confidence_score"),
    ({"confidence_score": -0.01}, Rule.CONFIDENCE_RANGE, "confidence_score"),
    ({"is_correction": True}, Rule.CORRECTION_NEEDS_TARGET, "corrects_decision_id"),
    ({"corrects_decision_id": new_id()}, Rule.TARGET_NEEDS_CORRECTION_FLAG, "is_correction"),
    ({"question": "  "}, Rule.NON_EMPTY, "question"),
    ({"chosen_option": ""}, Rule.NON_EMPTY, "chosen_option"),
    ({"parent_decision_id": None}, Rule.ONLY_ROOT_LACKS_PARENT, "parent_decision_id"),
    ({"context_snapshot": {"hot_context_hash": "9f86d0", "hot_context_ref": "r"}},
     Rule.HASH_FORMAT, "context_snapshot.hot_context_hash"),
    ({"decision_type": "daydream"}, Rule.SCHEMA, "decision_type"),
    ({"surprise": 1}, Rule.SCHEMA, "surprise"),
])
def test_each_rule_is_named(fields: dict[str, Any], rule: Rule, field: str) -> None:
    assert (rule, field) in broken(child(**fields))


def test_root_must_have_no_parent() -> None:
    assert (Rule.ROOT_HAS_NO_PARENT, "parent_decision_id") in broken(
        root(parent_decision_id=new_id()))


def test_own_parent_is_refused() -> None:
    d = child()
    d["parent_decision_id"] = d["decision_id"]
    assert (Rule.PARENT_EXISTS, "parent_decision_id") in broken(d)


def test_every_broken_cross_field_rule_is_reported_at_once() -> None:
    d = root(parent_decision_id=new_id(), is_correction=True)
    assert {Rule.ROOT_HAS_NO_PARENT, Rule.CORRECTION_NEEDS_TARGET} <= {r for r, _ in broken(d)}


def test_valid_decision_round_trips_and_ids_are_canonical() -> None:
    d = child()
    d["plan_id"] = d["plan_id"].lower()
    model = Decision.model_validate(d)
    assert model.plan_id == d["plan_id"].upper()
    assert Decision.model_validate_json(model.model_dump_json()) == model


def test_created_at_is_utc_milliseconds() -> None:
    model = Decision.model_validate(child(created_at="2026-01-02T03:04:05.123456+02:00"))
    assert model.created_at.isoformat() == "2026-01-02T01:04:05.123000+00:00"


@given(
    is_root=st.booleans(), has_parent=st.booleans(), is_correction=st.booleans(),
    has_target=st.booleans(),
    confidence=st.one_of(st.none(), st.floats(allow_nan=False, min_value=-2, max_value=2)),
)
def test_rules_combine(is_root: bool, has_parent: bool, is_correction: bool, has_target: bool,
                       confidence: float | None) -> None:
    """Valid exactly when no rule is broken; each broken rule is named."""
    d = decision(new_id(), new_id() if has_parent else None,
                 DecisionType.PROMPT_DEFINITION.value if is_root else "strategy_choice",
                 is_correction=is_correction,
                 corrects_decision_id=new_id() if has_target else None,
                 confidence_score=confidence)
    expected = set()
    if is_root and has_parent:
        expected.add(Rule.ROOT_HAS_NO_PARENT)
    if not is_root and not has_parent:
        expected.add(Rule.ONLY_ROOT_LACKS_PARENT)
    if is_correction and not has_target:
        expected.add(Rule.CORRECTION_NEEDS_TARGET)
    if has_target and not is_correction:
        expected.add(Rule.TARGET_NEEDS_CORRECTION_FLAG)
    confidence_ok = confidence is None or 0.0 <= confidence <= 1.0
    if not confidence_ok:
        expected = {Rule.CONFIDENCE_RANGE}  # field errors stop the cross-field checks
    if not expected:
        Decision.model_validate(d)
        return
    got = {rule for rule, _ in broken(d)}
    assert got == expected


@pytest.mark.parametrize(("path", "why"), [
    ("/etc/passwd", "absolute"),
    ("\\\\server\\share\\x", "absolute"),
    ("C:/Windows/x.txt", "absolute"),
    ("../outside.txt", "'..'"),
    ("src/../../etc/passwd", "'..'"),
    ("src\\..\\..\\x", "'..'"),
    ("src/a\x00b.py", "control"),
    ("src/a\nb.py", "control"),
    ("src/a\x7fb.py", "control"),
    ("src/" + "x" * 256 + "/a.py", "component over 255"),
    ("src/" + "é" * 128, "component over 255"),  # 256 bytes in UTF-8
    ("a/" * 600, "at most 1024"),
])
def test_unsafe_artifact_paths_are_refused_by_name(path: str, why: str) -> None:
    d = child(artifacts_produced=[{"artifact_path": "ok.txt", "artifact_type": "file"},
                                  {"artifact_path": path, "artifact_type": "file"}])
    assert broken(d) == {(Rule.SAFE_ARTIFACT_PATH, "artifacts_produced.1.artifact_path")}
    with pytest.raises(ValidationError) as exc:
        Decision.model_validate(d)
    assert why in str(exc.value)


@pytest.mark.parametrize("path", [
    "src/app.py", "./src/app.py", "a/b/c..d/e", "...", "x" * 255, "a/" * 500 + "b",
    "docs/ünïcode.md", "with space/and-dash_1.txt",
])
def test_safe_artifact_paths_are_accepted(path: str) -> None:
    d = child(artifacts_produced=[{"artifact_path": path, "artifact_type": "file"}])
    d.pop("sequence_number", None)
    assert Decision.model_validate(d).artifacts_produced[0].artifact_path == path


def test_a_stored_decision_with_an_unsafe_path_still_loads() -> None:
    """Recorded before the rule existed: reading it must not fail (a revert skips it)."""

    d = child(artifacts_produced=[{"artifact_path": "/etc/passwd\x00", "artifact_type": "f"}])
    d.pop("sequence_number", None)
    loaded = Decision.model_validate(d, context={STORED: True})
    assert loaded.artifacts_produced[0].artifact_path == "/etc/passwd\x00"
