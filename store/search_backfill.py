"""Search entries for decisions recorded before the search indexer wrote them.

A decision without an entry in decision_search is found only by a search that asks for
no word, type, agent or path: one recorded before search existed, or while its tokens
were still stored on the decision itself (ADR 0035). This gives each such decision its
entry, made from its own stored fields as the indexer makes it (store.search_index), a
batch at a time in decision ID order. Safe to run while the workers record and correct:
an entry is only inserted where none exists, so an entry the indexer wrote or an
erasure cut stays as it is; and the entries are no part of any chained record, so an
audit reads the same before and after.

    python -m bootstrap.search_backfill   # MONGODB_URI, MONGODB_DB as for the workers
"""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from store.database import DECISION_SEARCH, DECISIONS, Document, find_by_ids
from store.search_index import READ_PROJECTION, new_entry

BATCH = 500
"""Decisions read and indexed per round trip."""


async def backfill(db: AsyncDatabase[Document], batch: int = BATCH) -> int:
    """Give every decision without a search entry its entry; how many were given one."""
    done, after = 0, ""
    while True:
        docs = await db[DECISIONS].find({"_id": {"$gt": after}}, READ_PROJECTION).sort(
            "_id", 1).limit(batch).to_list()
        if not docs:
            return done
        have = {e["_id"] for e in await find_by_ids(
            db[DECISION_SEARCH], [d["_id"] for d in docs], {"_id": 1})}
        writes = [new_entry(d) for d in docs if d["_id"] not in have]
        if writes:
            done += (await db[DECISION_SEARCH].bulk_write(writes, ordered=False)
                     ).upserted_count
        after = docs[-1]["_id"]
