"""Finding decisions across plans: the filter (`SearchFilter`) and the tokens a decision
is found by (`search_tokens`).

The database we keep to (the common MongoDB subset; SecantusDB refuses text indexes)
has no text search, so the ledger keeps its own: the recorder writes each decision's
`search_tokens`, one multikey index serves them, and a query asks for all of its tokens
(`$all`). The same functions make the tokens a decision is stored with and the tokens a
query asks for, so the two always agree. Tokens are of two kinds, which cannot collide:

- words: the lowercase word characters (`\\w+`) of the question, the chosen option and
  the rationale, each cut to WORD_MAX characters;
- facets, `name:value` (a word never holds a colon): the decision type, the agent that
  answers for it, and each artifact path and the folders above it. They come first, so
  a long rationale cannot push them out of the bound.

The count and length are bounded (TOKENS_MAX, WORD_MAX, TEXT_SCAN), so a hostile
decision costs the recorder no more than an ordinary one, and a query's words are bound
the same way: a word longer than WORD_MAX is found by its first WORD_MAX characters.
Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from contracts.decisions.currency import Currency
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType

__all__ = ["QUERY_WORDS_MAX", "TOKENS_MAX", "WORD_MAX", "Found", "SearchFilter",
           "agent_token", "path_tokens", "query_words", "search_tokens", "type_token"]

WORD_MAX = 32
"""Characters of a word kept (longer words are stored and asked for by their prefix)."""
TOKENS_MAX = 96
"""Tokens per decision at most: its facets, then its first distinct words."""
TEXT_SCAN = 4000
"""Characters of each text field read for words: a huge rationale costs no more."""
ARTIFACTS_MAX = 16
"""Artifacts per decision whose paths become tokens."""
DEPTH_MAX = 8
"""Folders above an artifact path that become tokens (`src/`, `src/billing/`, ...)."""
FACET_MAX = 300
"""Characters of a facet's value kept (an agent name, a path)."""
QUERY_WORDS_MAX = 8
"""Words of a query used: each is one more index lookup to intersect."""

_WORD = re.compile(r"\w+")




def _bounded(value: str) -> str:
    """The value's first FACET_MAX characters, as valid UTF-8 (a lone surrogate, which
    no stored name holds and BSON cannot carry, becomes `?`)."""
    return value[:FACET_MAX].encode("utf-8", "replace").decode("utf-8")


def type_token(kind: DecisionType) -> str:
    return f"type:{kind.value}"


def agent_token(name: str) -> str:
    """The agent a decision is filed under: the principal that signed it, as verified
    (`recorded_by`), or, for one recorded unsigned, the name it gives itself."""
    return "agent:" + _bounded(name.strip())


def path_tokens(path: str) -> list[str]:
    """The artifact path and the folders above it (at most DEPTH_MAX), each a token:
    `src/billing/tax.py` is found by itself, `src/billing/` and `src/`."""
    clean = _bounded(path.replace("\\", "/").removeprefix("./"))
    parts = clean.split("/")
    folders = ["path:" + "/".join(parts[:i]) + "/" for i in range(1, len(parts))]
    return [*folders[:DEPTH_MAX], "path:" + clean]


def words(text: str | None) -> list[str]:
    """The lowercase words of `text` (its first TEXT_SCAN characters), each cut to
    WORD_MAX characters, in order, with repeats."""
    if not text:
        return []
    return [w[:WORD_MAX] for w in _WORD.findall(text[:TEXT_SCAN].lower())]


def search_tokens(decision: Decision, recorded_by: str | None) -> list[str]:
    """What the decision is found by: its facets, then its distinct words, at most
    TOKENS_MAX in all."""
    tokens = [type_token(decision.decision_type)]
    name = recorded_by or (decision.agent.name if decision.agent else None)
    if name:
        tokens.append(agent_token(name))
    for artifact in decision.artifacts_produced[:ARTIFACTS_MAX]:
        tokens.extend(path_tokens(artifact.artifact_path))
    for field in (decision.question, decision.chosen_option, decision.rationale):
        tokens.extend(words(field))
    return list(dict.fromkeys(tokens))[:TOKENS_MAX]


def query_words(text: str | None) -> list[str]:
    """The distinct words of a query (its first QUERY_WORDS_MAX), as they are stored."""
    return list(dict.fromkeys(words(text)))[:QUERY_WORDS_MAX]


def query_path(path: str) -> list[str]:
    """Tokens any of which an artifact under `path` carries: a folder (`src/billing/`,
    or `src/billing` without its slash) or the file itself."""
    clean = _bounded(path.strip().replace("\\", "/").removeprefix("./"))
    if not clean:
        return []
    if clean.endswith("/"):
        return ["path:" + clean]
    return ["path:" + clean, "path:" + clean + "/"]


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which decisions a search keeps. Every field narrows; None (ANY) keeps all.

    Text, type, agent and path are answered by the tokens' index; the time range and
    currency by the decision, the plan status by its plan's record (services/search.py
    reads those a page at a time, within a bound)."""

    text: str | None = None
    """Words that must all appear (case-insensitive) in the question, the chosen option
    or the rationale."""
    decision_type: DecisionType | None = None
    agent: str | None = None
    """As `agent_token`: the verified principal, or an unsigned decision's own name."""
    path: str | None = None
    """An artifact path the decision produced, or a folder above it."""
    since: datetime | None = None
    """Created at or after (UTC)."""
    until: datetime | None = None
    """Created before (UTC)."""
    currency: Currency = Currency.ANY

    def tokens(self) -> list[str]:
        """The tokens a decision must all carry."""
        out = query_words(self.text)
        if self.decision_type is not None:
            out.append(type_token(self.decision_type))
        if self.agent and self.agent.strip():
            out.append(agent_token(self.agent))
        return out

    def path_choices(self) -> list[str]:
        """Tokens of which a decision must carry one (empty: no path asked for)."""
        return query_path(self.path) if self.path else []

    def lead(self) -> list[str]:
        """The tokens the database is asked for (a decision carrying any of them): the
        one likely to be rarest, as the server intersects no two index lookups. The
        longest word; else the path; else the agent; else the type (one of eleven)."""
        found = query_words(self.text)
        if found:
            return [max(found, key=len)]
        if self.path_choices():
            return self.path_choices()
        return self.tokens()[-1:]

    @property
    def hopeless(self) -> bool:
        """A text was asked for but holds no word (`...`, `💥`): no decision can match."""
        return bool(self.text and self.text.strip()) and not query_words(self.text)

    @property
    def exact(self) -> bool:
        """Whether every decision the lead tokens find is kept (nothing left to check)."""
        asked = len(self.tokens()) + (1 if self.path_choices() else 0)
        return asked <= 1 and self.since is None and self.until is None \
            and self.currency is Currency.ANY

    def keeps(self, found: Found) -> bool:
        """Whether the decision carries every token asked for and lies in the time range
        and currency: what the lead tokens do not answer."""
        choices = self.path_choices()
        if not set(self.tokens()) <= found.tokens \
                or (choices and found.tokens.isdisjoint(choices)):
            return False
        return self._in_range(found.decision)

    def _in_range(self, decision: Decision) -> bool:
        if self.since is not None and decision.created_at < self.since:
            return False
        if self.until is not None and decision.created_at >= self.until:
            return False
        if self.currency is Currency.CURRENT:
            return decision.superseded_by is None
        if self.currency is Currency.SUPERSEDED:
            return decision.superseded_by is not None
        return True

@dataclass(frozen=True, slots=True)
class Found:
    """A decision a search found, with the principal that signed it as the recorder
    verified it (None: recorded unsigned); the agent it names itself is its `agent`."""

    decision: Decision
    recorded_by: str | None
    tokens: frozenset[str]
    """Its search tokens (none for a decision recorded before search existed)."""
