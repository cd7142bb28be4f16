"""The pure rules of erasure and retention: an erased record's chain content is the one
it had, erasing twice keeps the first digests, policies parse or say what is wrong in
one line, and plans go only by whole families."""

from __future__ import annotations

import pytest

from contracts.decisions.model import Decision
from contracts.retention.erasure import DECISION_TEXT, ERASED, erased_names, erasure_update
from contracts.retention.policies import Action, Records, parse_policies, removable_families
from contracts.trust.chain import decision_content
from store.decisions import from_document, to_document
from tests.factories import decision, root


def _erased(doc: dict[str, object]) -> dict[str, object]:
    """The document after the erasure's `$set`."""
    update = erasure_update(doc, DECISION_TEXT)
    out = dict(doc)
    for key, value in update.items():
        if key == "erased.fields":
            out["erased"] = {"fields": value}
        else:
            out[key] = value
    return out


def test_an_erased_decision_keeps_its_chain_content_and_still_loads() -> None:
    top = root()
    d = Decision.model_validate(decision(
        top["plan_id"], top["decision_id"], "tool_invocation", rationale="secret",
        tool={"name": "shell", "arguments": {"cmd": "cat secret"}}))
    doc = to_document(d.model_copy(update={"sequence_number": 3}))
    before = decision_content(doc)
    erased = _erased(doc)
    assert decision_content(erased) == before
    assert "secret" not in repr({k: v for k, v in erased.items() if k != "erased"})
    again = _erased(erased)  # erasing twice keeps the first digests
    assert decision_content(again) == before
    loaded = from_document(erased)
    assert loaded.question == ERASED and loaded.rationale is None
    assert loaded.tool is not None and loaded.tool.name == "shell" and loaded.tool.arguments == {}
    assert loaded.sequence_number == 3 and loaded.parent_decision_id == d.parent_decision_id
    assert "rationale" in erased_names(erased)


def test_a_changed_field_under_an_erasure_is_still_changed() -> None:
    top = root()
    doc = to_document(Decision.model_validate(decision(top["plan_id"], top["decision_id"]))
                      .model_copy(update={"sequence_number": 1}))
    erased = _erased(doc)
    erased["parent_decision_id"] = "01J0000000000000000000000A"  # not an erased field
    assert decision_content(erased) != decision_content(doc)


def test_policies_parse() -> None:
    found = parse_policies('[{"name": "old", "plans": ["completed"], "older_than_days": 365,'
                           ' "action": "remove", "export": true},'
                           ' {"records": "dead_letters", "older_than_days": 90}]')
    assert found[0].action is Action.REMOVE and found[0].export
    assert found[1].records is Records.DEAD_LETTERS
    assert "exported, then removed after 365 days" in found[0].describe()
    assert parse_policies("") == ()


@pytest.mark.parametrize(("text", "words"), [
    ("{", "not JSON"),
    ('{"a": 1}', "a JSON list"),
    ('[{"plans": ["completed"]}]', "older_than_days"),
    ('[{"plans": ["gone"], "older_than_days": 1}]', "gone"),
    ('[{"older_than_days": 1}]', "name the plan statuses"),
    ('[{"plans": ["completed"], "older_than_days": -1}]', "must be > 0"),
    ('[{"plans": ["completed"], "older_than_days": 1, "action": "burn"}]', "burn"),
])
def test_bad_policies_are_one_line(text: str, words: str) -> None:
    with pytest.raises(ValueError, match="RETENTION_POLICIES") as caught:
        parse_policies(text)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_plans_go_only_by_whole_families() -> None:
    family = {"P": ["P", "C1", "C2"], "C1": ["P", "C1", "C2"], "C2": ["P", "C1", "C2"],
              "Q": ["Q", "D"], "D": ["Q", "D"], "S": ["S"]}
    got = removable_families(["P", "C1", "C2", "Q", "S"], family)
    assert got.removable == [["C1", "C2", "P"], ["S"]]
    assert got.held == ["Q"]  # its child D is not due
