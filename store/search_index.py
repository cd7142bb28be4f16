"""Search entries (`decision_search`): what a search finds a decision by, written after
the decision's own transaction (ADR 0035).

A multikey index over every decision's tokens more than halved the insert rate when the
recorder kept it inside its transaction. So each transaction that writes decisions (the
recorder's batch, a correction's step) makes their tokens (pure and cheap: bounded
words and facets) and adds them, QUEUE_ENTRIES at most per document, to `search_queue`
(only its `_id` index); the search indexer (workers/search_indexer.py, one worker at a
time under its lease) inserts them as entries `{_id: decision_id, plan_id, tokens}`
and then deletes the queue documents. The queue is written in the same transaction as
the decisions, so nothing recorded is ever missed, and a crash anywhere only repeats
work: an entry that exists already is left as it is (a duplicate key is the expected
answer), so indexing a decision twice is harmless and never undoes what an erasure
cut. A queue document that cannot be indexed is tried MAX_ATTEMPTS times, then kept
with `failed_at` and its error (the gauges count it) and passed over.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from contracts.decisions.model import Decision
from contracts.decisions.search import search_tokens
from contracts.retention.erasure import erased_names, kept_tokens
from contracts.shared.timestamps import utc_now
from store.database import DECISION_SEARCH, SEARCH_QUEUE, Document, find_by_ids
from store.decisions import from_document
from store.translate import translate_errors

QUEUE_ENTRIES = 100
"""Entries per queue document at most: 100 of the largest a decision can have (96
tokens, paths of 300 characters) stay well under MongoDB's 16 MB per document."""
QUEUE_BATCH = 20
"""Queue documents one step indexes."""
MAX_ATTEMPTS = 5
"""Steps a queue document may fail before it is set aside as failed."""
ERROR_MAX = 300  # characters of an error kept on a failed queue document
DUPLICATE_KEY = 11000
READ_PROJECTION = {"chain": 0, "signature": 0, "actor_reasoning": 0}
"""What is left out of a decision read to make its tokens: nothing they are made from."""


def entry(decision: Decision, recorded_by: str | None) -> Document:
    """The decision's search entry, filed under its verified signer."""
    return {"_id": decision.decision_id, "plan_id": decision.plan_id,
            "tokens": search_tokens(decision, recorded_by)}


async def queue_for_search(db: AsyncDatabase[Document], entries: Sequence[Document],
                           now: datetime, session: AsyncClientSession) -> None:
    """Queue the transaction's entries for the indexer, inside that transaction."""
    if entries:
        await db[SEARCH_QUEUE].insert_many(
            [{"entries": list(entries[i:i + QUEUE_ENTRIES]), "at": now, "attempts": 0}
             for i in range(0, len(entries), QUEUE_ENTRIES)], session=session)


def entry_tokens(doc: Document) -> list[str]:
    """A stored decision's tokens, made as the recorder makes them; only the kept facets
    for an erased one."""
    by = doc.get("recorded_by")
    tokens = search_tokens(from_document(doc), by if isinstance(by, str) else None)
    return kept_tokens(tokens) if erased_names(doc) else tokens


def new_entry(doc: Document) -> UpdateOne:
    """Insert a stored decision's entry unless it has one (an erasure's cut entry
    stays): the backfill's write."""
    return UpdateOne({"_id": doc["_id"]},
                     {"$setOnInsert": {"plan_id": doc.get("plan_id"),
                                       "tokens": entry_tokens(doc)}}, upsert=True)


def erased_entry(doc: Document) -> UpdateOne:
    """The entry of a decision an erasure reaches (`doc` as read before it): only its
    type and agent, whether or not the indexer got to it first."""
    return UpdateOne({"_id": doc["_id"]},
                     {"$set": {"plan_id": doc.get("plan_id"),
                               "tokens": kept_tokens(entry_tokens(doc))}}, upsert=True)


def _entries(queued: Document) -> list[Document]:
    """A queue document's entries; anything else in it is not one (never raises)."""
    found = queued.get("entries")
    if not isinstance(found, list):
        return []
    return [e for e in found if isinstance(e, dict) and isinstance(e.get("_id"), str)
            and isinstance(e.get("tokens"), list)]


@dataclass(frozen=True, slots=True)
class Step:
    queued: int
    """Queue documents read (0: nothing was waiting)."""
    indexed: int
    """Entries inserted (0 for decisions indexed before)."""
    failed: int
    """Queue documents set aside as failed in this step."""


@dataclass(frozen=True, slots=True)
class Backlog:
    pending: int
    """Queue documents waiting."""
    oldest: datetime | None
    """When the oldest waiting one was written (None: none waits)."""
    failed: int


@translate_errors
class SearchIndex:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._queue = db[SEARCH_QUEUE]
        self._entries = db[DECISION_SEARCH]

    async def step(self, batch: int = QUEUE_BATCH) -> Step:
        """Insert the entries of the oldest `batch` waiting queue documents, then delete
        the queue documents done. An entry already there (indexed before, or cut by an
        erasure) stays as it is."""
        queue = await self._queue.find({"failed_at": None}).sort("_id", 1).limit(
            batch).to_list()
        if not queue:
            return Step(0, 0, 0)
        owner: list[int] = []
        writes: list[Document] = []
        errors: dict[int, str] = {}
        for n, q in enumerate(queue):
            found = _entries(q)
            if len(found) != len(q.get("entries") or []):
                errors[n] = "a queue entry is not {_id: str, plan_id, tokens: list}"
            writes += found
            owner += [n] * len(found)
        indexed = await self._insert(writes, owner, errors)
        done = [q["_id"] for n, q in enumerate(queue) if n not in errors]
        if done:
            await self._queue.delete_many({"_id": {"$in": done}})
        failed = 0
        for n, error in errors.items():
            failed += await self._retry_or_fail(queue[n], error)
        return Step(len(queue), indexed, failed)

    async def _insert(self, writes: list[Document], owner: list[int],
                      errors: dict[int, str]) -> int:
        """Insert the entries; a duplicate key is an entry already there. Any other
        write error is noted against the queue document the entry came from."""
        if not writes:
            return 0
        try:
            return len((await self._entries.insert_many(writes, ordered=False)).inserted_ids)
        except BulkWriteError as exc:
            failures = exc.details.get("writeErrors", [])
            for f in failures:
                if f.get("code") != DUPLICATE_KEY:
                    errors.setdefault(owner[int(f["index"])],
                                      str(f.get("errmsg", "write error"))[:ERROR_MAX])
            return int(exc.details.get("nInserted", 0))

    async def _retry_or_fail(self, queued: Document, error: str) -> int:
        """Count a failed attempt; at MAX_ATTEMPTS set the document aside (1), else 0."""
        attempts = int(queued.get("attempts") or 0) + 1
        update: Document = {"attempts": attempts, "error": error}
        if attempts >= MAX_ATTEMPTS:
            update["failed_at"] = utc_now()
        await self._queue.update_one({"_id": queued["_id"]}, {"$set": update})
        return 1 if attempts >= MAX_ATTEMPTS else 0

    async def waiting(self) -> bool:
        """Whether any queue document waits (one read of a queue that is small when
        the indexer keeps up)."""
        return await self._queue.find_one({"failed_at": None}, {"_id": 1}) is not None

    async def backlog(self) -> Backlog:
        """How far the indexer is behind: for the gauges (the queue is small when it
        keeps up, so counting it is cheap)."""
        pending = await self._queue.count_documents({"failed_at": None})
        oldest = await self._queue.find_one({"failed_at": None}, {"at": 1}, sort=[("_id", 1)])
        failed = await self._queue.count_documents({"failed_at": {"$ne": None}})
        at = oldest.get("at") if oldest else None
        return Backlog(pending, at if isinstance(at, datetime) else None, failed)

    async def tokens_of(self, decision_ids: Iterable[str]) -> dict[str, frozenset[str]]:
        """The indexed decisions' tokens (a decision not yet indexed is absent)."""
        return {str(e["_id"]): stored_tokens(e.get("tokens"))
                for e in await find_by_ids(self._entries, decision_ids)}


def stored_tokens(value: Any) -> frozenset[str]:
    """An entry's tokens as read back (anything but strings dropped)."""
    return frozenset(t for t in value if isinstance(t, str)) \
        if isinstance(value, list) else frozenset()
