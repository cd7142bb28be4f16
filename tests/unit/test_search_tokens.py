"""What a decision is found by (contracts.decisions.search): lowercase whole words of
its text, its facets first, bounded in count and length whatever the decision holds,
and the same tokens for a query as for the record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.decisions.model import Decision
from contracts.decisions.search import (
    TOKENS_MAX,
    WORD_MAX,
    Currency,
    Found,
    SearchFilter,
    path_tokens,
    search_tokens,
)
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from contracts.trust.chain import decision_content
from store.decisions import to_document
from tests.factories import decision

pytestmark = pytest.mark.unit


def make(**fields: object) -> Decision:
    return Decision.model_validate(decision(new_id(), new_id(), "tool_invocation", **fields))


def test_words_facets_and_paths() -> None:
    d = make(question="Which Rate-Limiter?", chosen_option="Token BUCKET token",
             rationale=None, agent={"name": "billing-agent"},
             artifacts_produced=[{"artifact_path": "src/billing/tax.py",
                                  "artifact_type": "file"}])
    tokens = search_tokens(d, None)
    assert tokens[:5] == ["type:tool_invocation", "agent:billing-agent", "path:src/",
                          "path:src/billing/", "path:src/billing/tax.py"]
    assert tokens[5:] == ["which", "rate", "limiter", "token", "bucket"]
    # The verified signer is the agent the decision is filed under, not its own claim.
    assert "agent:alice" in search_tokens(d, "alice")
    assert "agent:billing-agent" not in search_tokens(d, "alice")


def test_bounded_whatever_the_decision_holds() -> None:
    huge = " ".join(f"w{i}" for i in range(50_000)) + " " + "x" * 10_000
    d = make(question=huge, chosen_option="y" * 100_000, rationale=huge)
    tokens = search_tokens(d, None)
    assert len(tokens) == TOKENS_MAX
    assert all(len(t) <= WORD_MAX for t in tokens if ":" not in t)
    assert len(path_tokens("a/" * 500 + "f")) <= 9


def test_a_query_asks_for_what_is_stored() -> None:
    long_word = "Supercalifragilisticexpialidocious" * 3
    d = make(question=f"Use {long_word}?", rationale="Because (.*) of $where")
    f = Found(d, None, frozenset(search_tokens(d, None)))
    assert SearchFilter(text=long_word.upper()).keeps(f)
    assert SearchFilter(text="$where (.*) because").keeps(f)
    assert not SearchFilter(text="because nothing").keeps(f)
    assert SearchFilter(path="src").keeps(f) and SearchFilter(path="src/app.py").keeps(f)
    assert not SearchFilter(path="src/ap").keeps(f)
    assert not SearchFilter(decision_type=DecisionType.STRATEGY_CHOICE).keeps(f)
    assert not SearchFilter(currency=Currency.SUPERSEDED).keeps(f)
    assert not SearchFilter(since=datetime(2999, 1, 1, tzinfo=UTC)).keeps(f)


def test_lead_is_one_index_lookup() -> None:
    assert SearchFilter(text="a token bucket", agent="x").lead() == ["bucket"]
    assert SearchFilter(path="src/billing", agent="x").lead() == [
        "path:src/billing", "path:src/billing/"]
    assert SearchFilter(agent="x", decision_type=DecisionType.TOOL_INVOCATION).lead() == [
        "agent:x"]
    assert SearchFilter().lead() == [] and SearchFilter(text="!!! ...").lead() == []
    assert SearchFilter(text="bucket").exact and not SearchFilter(text="a b").exact


def test_tokens_are_not_chained_content() -> None:
    """A decision's chain link covers its own fields; the tokens are derived from them
    (and a reindex may write them again), so they are left out of its content."""
    d = make()
    with_tokens = to_document(d)
    assert with_tokens["search_tokens"]
    without = {k: v for k, v in with_tokens.items() if k != "search_tokens"}
    assert decision_content(with_tokens) == decision_content(without)
