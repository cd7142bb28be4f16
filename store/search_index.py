"""Search entries (`decision_search`): what a search finds a decision by, written after
the decision's own transaction (ADR 0035).

A multikey index over every decision's tokens more than halved the insert rate when the
recorder kept it inside its transaction. So each transaction that writes decisions (the
recorder's batch, a correction's step) adds one `search_queue` document naming them,
and the search indexer (workers/search_indexer.py, one worker at a time under its
lease) turns queue documents into entries `{_id: decision_id, plan_id, tokens}` and
then deletes them. The queue is written in the same transaction as the decisions, so
nothing recorded is ever missed and a crash anywhere only repeats work: an entry is
inserted only where none exists (`$setOnInsert`), so indexing a decision twice is
harmless and never undoes what an erasure cut. A queue document whose decisions cannot
be indexed is tried MAX_ATTEMPTS times, then kept with `failed_at` and its error (the
gauges count it) and passed over.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.search import search_tokens
from contracts.retention.erasure import erased_names, kept_tokens
from contracts.shared.timestamps import utc_now
from store.database import DECISION_SEARCH, DECISIONS, SEARCH_QUEUE, Document, find_by_ids
from store.decisions import from_document
from store.translate import translate_errors

QUEUE_BATCH = 20
"""Queue documents one step indexes (each names one transaction's decisions: a recorder
batch is at most a few hundred)."""
MAX_ATTEMPTS = 5
"""Steps a queue document may fail before it is set aside as failed."""
ERROR_MAX = 300
"""Characters of an error kept on a failed queue document."""
READ_PROJECTION = {"chain": 0, "signature": 0, "actor_reasoning": 0}
"""What the indexer leaves out of a decision: nothing tokens are made from."""


async def queue_for_search(db: AsyncDatabase[Document], decision_ids: Sequence[str],
                           now: datetime, session: AsyncClientSession) -> None:
    """Name the transaction's decisions for the indexer, inside that transaction."""
    if decision_ids:
        await db[SEARCH_QUEUE].insert_one(
            {"ids": list(decision_ids), "at": now, "attempts": 0}, session=session)


def entry_tokens(doc: Document) -> list[str]:
    """A stored decision's tokens, made as contracts.decisions.search makes them, filed
    under its verified signer; only the kept facets for an erased one."""
    by = doc.get("recorded_by")
    tokens = search_tokens(from_document(doc), by if isinstance(by, str) else None)
    return kept_tokens(tokens) if erased_names(doc) else tokens


def new_entry(doc: Document) -> UpdateOne:
    """Insert the decision's entry unless it has one (an erasure's cut entry stays)."""
    return UpdateOne({"_id": doc["_id"]},
                     {"$setOnInsert": {"plan_id": doc.get("plan_id"),
                                       "tokens": entry_tokens(doc)}}, upsert=True)


def erased_entry(doc: Document) -> UpdateOne:
    """The entry of a decision an erasure reaches (`doc` as read before it): only its
    type and agent, whether or not the indexer got to it first."""
    return UpdateOne({"_id": doc["_id"]},
                     {"$set": {"plan_id": doc.get("plan_id"),
                               "tokens": kept_tokens(entry_tokens(doc))}}, upsert=True)


@dataclass(frozen=True, slots=True)
class Step:
    """What one step did."""

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


def _ids(queued: Document) -> list[str]:
    ids = queued.get("ids")
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


@translate_errors
class SearchIndex:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._queue = db[SEARCH_QUEUE]
        self._decisions = db[DECISIONS]
        self._entries = db[DECISION_SEARCH]

    async def step(self, batch: int = QUEUE_BATCH) -> Step:
        """Index the oldest `batch` waiting queue documents' decisions, then delete the
        queue documents done. A decision gone since (retention) is skipped."""
        queue = await self._queue.find({"failed_at": None}).sort("_id", 1).limit(
            batch).to_list()
        if not queue:
            return Step(0, 0, 0)
        docs = await find_by_ids(self._decisions, [i for q in queue for i in _ids(q)],
                                 READ_PROJECTION)
        writes, broken = [], {}
        for doc in docs:
            try:
                writes.append(new_entry(doc))
            except Exception as exc:  # a stored record that no longer loads
                broken[str(doc["_id"])] = f"{type(exc).__name__}: {exc}"[:ERROR_MAX]
        indexed = 0
        if writes:
            indexed = (await self._entries.bulk_write(writes, ordered=False)).upserted_count
        done = [q["_id"] for q in queue if broken.keys().isdisjoint(_ids(q))]
        if done:
            await self._queue.delete_many({"_id": {"$in": done}})
        failed = 0
        for q in queue:
            errors = [broken[i] for i in _ids(q) if i in broken]
            if errors:
                failed += await self._retry_or_fail(q, errors[0])
        return Step(len(queue), indexed, failed)

    async def _retry_or_fail(self, queued: Document, error: str) -> int:
        """Count a failed attempt; at MAX_ATTEMPTS set the document aside (1), else 0."""
        attempts = int(queued.get("attempts") or 0) + 1
        update: Document = {"attempts": attempts, "error": error}
        if attempts >= MAX_ATTEMPTS:
            update["failed_at"] = utc_now()
        await self._queue.update_one({"_id": queued["_id"]}, {"$set": update})
        return 1 if attempts >= MAX_ATTEMPTS else 0

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
