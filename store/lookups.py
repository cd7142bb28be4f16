"""Read-only queries that find things for an operator: the records an ID's last
characters name, plan roots by a filter, corrections newest first, a decision's
comments, decisions by their search tokens.

Part of the views (store/views.py's `TreeViews` inherits them). A suffix is matched by
a regular expression anchored at the end of `_id`, which no index serves: the
collections are scanned, the decisions' too (SecantusDB: about 0.6 s per 20,000
decisions; mongod far less). Each query stops at its second match, so an ambiguous
suffix costs no more than a unique one. A plan list's filters on the root (project,
agent, time, text) are one query each page; text is an escaped, case-insensitive
regular expression, never the caller's pattern.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.comments import COMMENTS_SHOWN, Comment
from contracts.decisions.model import Decision
from contracts.decisions.search import Found
from contracts.shared.views import IdKind, IdMatch, RootFilter
from store.corrections import from_document as correction_from
from store.database import (
    COMMENTS,
    CORRECTIONS,
    DECISIONS,
    INVARIANT_VIOLATIONS,
    INVARIANTS,
    PLANS,
    Document,
)
from store.decisions import ROOT_QUERY, from_document
from store.translate import translate_errors

MAX_PAGE = 500
"""Largest page any view returns: a request cannot make the server read a whole plan."""
TEXT_MAX = 200
"""Characters of a text filter kept: a longer one matches nothing a person typed."""
SEARCH_PROJECTION = {"actor_reasoning": 0, "chain": 0, "signature": 0}
"""What a search leaves out: a result shows a decision's fields, not its raw reasoning
or its proofs."""


def _found(doc: Document) -> Found:
    by, tokens = doc.get("recorded_by"), doc.get("search_tokens")
    return Found(from_document(doc), by if isinstance(by, str) else None,
                 frozenset(t for t in tokens if isinstance(t, str))
                 if isinstance(tokens, list) else frozenset())


def root_query(where: RootFilter | None) -> dict[str, Any]:
    """The roots a filter keeps, as a MongoDB query."""
    query: dict[str, Any] = dict(ROOT_QUERY)
    if where is None:
        return query
    if where.project:
        query["project"] = where.project
    if where.agent:
        # The verified principal; the name a root gives itself counts only for a root
        # recorded unsigned (a signed root naming another agent is that principal's).
        query["$or"] = [{"recorded_by": where.agent},
                        {"recorded_by": None, "agent.name": where.agent}]
    created: dict[str, Any] = {}
    if where.since is not None:
        created["$gte"] = where.since
    if where.until is not None:
        created["$lt"] = where.until
    if created:
        query["created_at"] = created
    if where.text:
        pattern = {"$regex": re.escape(where.text[:TEXT_MAX]), "$options": "i"}
        text = [{"question": pattern}, {"chosen_option": pattern}]
        query["$and"] = [{"$or": text}]
    return query


@translate_errors
class Lookups:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._decisions = db[DECISIONS]
        self._plans = db[PLANS]
        self._corrections = db[CORRECTIONS]
        self._invariants = db[INVARIANTS]
        self._violations = db[INVARIANT_VIOLATIONS]
        self._comments = db[COMMENTS]

    async def recent_roots(self, limit: int, before: str | None = None,
                           where: RootFilter | None = None) -> list[Decision]:
        """Plan roots (prompt_definition, not a correction) that `where` keeps, newest
        first: decision IDs are ULIDs, so their order is their creation order."""
        query = root_query(where)
        if before is not None:
            query["_id"] = {"$lt": before}
        cursor = self._decisions.find(query, {"actor_reasoning": 0}
                                      ).sort("_id", -1).limit(min(limit, MAX_PAGE))
        return [from_document(d) async for d in cursor]

    async def search(self, lead: list[str], limit: int,
                     before: str | None = None) -> list[Found]:
        """Decisions newest first (by ID) carrying any of the tokens `lead` (none: every
        decision), those before `before`, with their tokens. One index lookup (the
        index search_tokens): SecantusDB serves neither `$all` nor a second condition
        on the array from an index, so the caller checks the rest. The tokens are plain
        strings compared as such, never operators or patterns."""
        query: dict[str, Any] = {}
        if lead:
            query["search_tokens"] = lead[0] if len(lead) == 1 else {"$in": lead}
        if before is not None:
            query["_id"] = {"$lt": before}
        cursor = self._decisions.find(query, SEARCH_PROJECTION).sort("_id", -1).limit(
            min(limit, MAX_PAGE))
        return [_found(d) async for d in cursor]

    async def recent_corrections(self, plan_id: str | None = None,
                                 status: CorrectionStatus | None = None, limit: int = 100,
                                 before: str | None = None) -> list[Correction]:
        """Corrections newest first (correction IDs are ULIDs made at the request)."""
        query: dict[str, Any] = {}
        if plan_id is not None:
            query["plan_id"] = plan_id
        if status is not None:
            query["status"] = status.value
        if before is not None:
            query["_id"] = {"$lt": before}
        cursor = self._corrections.find(query).sort("_id", -1).limit(min(limit, MAX_PAGE))
        return [correction_from(d).correction async for d in cursor]

    async def comments(self, decision_id: str) -> list[Comment]:
        """The decision's comments, oldest first (the newest COMMENTS_SHOWN)."""
        cursor = self._comments.find({"decision_id": decision_id}).sort(
            "_id", -1).limit(COMMENTS_SHOWN)
        return list(reversed([Comment.model_validate(
            {**{k: v for k, v in d.items() if k != "_id"}, "comment_id": d["_id"]})
            async for d in cursor]))

    async def plan_comments(self, plan_id: str, limit: int = 10_000) -> list[Comment]:
        """Every comment on the plan's decisions, oldest first (for an export)."""
        cursor = self._comments.find({"plan_id": plan_id}).sort("_id", 1).limit(limit)
        return [Comment.model_validate(
            {**{k: v for k, v in d.items() if k != "_id"}, "comment_id": d["_id"]})
            async for d in cursor]

    async def ids_ending(self, suffix: str, limit: int = 10,
                         kinds: Collection[IdKind] | None = None) -> list[IdMatch]:
        """Every record whose ID ends with `suffix` (upper case), at most `limit` per
        kind, of `kinds` only (None: all): only their collections are scanned, so a
        correction's suffix never costs a scan of the decisions. A plan is found by its
        plan document (every plan with a decision has one: its sequence counter)."""
        pattern = {"$regex": re.escape(suffix) + "$"}
        wanted = set(IdKind) if kinds is None else set(kinds)
        found: list[IdMatch] = []
        scans = ((IdKind.CORRECTION, self._corrections), (IdKind.INVARIANT, self._invariants),
                 (IdKind.VIOLATION, self._violations), (IdKind.PLAN, self._plans),
                 (IdKind.DECISION, self._decisions))
        for kind, coll in scans:
            if kind not in wanted:
                continue
            async for d in coll.find({"_id": pattern}, {"_id": 1, "plan_id": 1}).limit(limit):
                plan = d["_id"] if kind is IdKind.PLAN else d.get("plan_id")
                found.append(IdMatch(kind, d["_id"], plan))
        return found
