"""Search tokens for decisions recorded before the recorder wrote them.

A decision stored without `search_tokens` is found only by a search that asks for no
word, type, agent or path. This gives each such decision its tokens, made from its own
stored fields as the recorder makes them (contracts.decisions.search), a batch at a time
in decision ID order. Safe to run while the workers record and correct: each update
sets only the tokens and only where they are still missing, and the tokens are no part
of a decision's chained content, so an audit reads the same before and after.

    python -m bootstrap.search_backfill   # MONGODB_URI, MONGODB_DB as for the workers
"""

from __future__ import annotations

from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.search import search_tokens
from store.database import DECISIONS, Document
from store.decisions import from_document

BATCH = 500
"""Decisions read and updated per round trip."""


async def backfill(db: AsyncDatabase[Document], batch: int = BATCH) -> int:
    """Give every decision without tokens its tokens; how many were given them."""
    coll = db[DECISIONS]
    done, after = 0, ""
    while True:
        query: dict[str, Any] = {"_id": {"$gt": after}, "search_tokens": {"$exists": False}}
        docs = await coll.find(query, {"chain": 0, "signature": 0}).sort("_id", 1).limit(
            batch).to_list()
        if not docs:
            return done
        updates = []
        for doc in docs:
            by = doc.get("recorded_by")
            tokens = search_tokens(from_document(doc), by if isinstance(by, str) else None)
            updates.append(UpdateOne({"_id": doc["_id"], "search_tokens": {"$exists": False}},
                                     {"$set": {"search_tokens": tokens}}))
        done += (await coll.bulk_write(updates, ordered=False)).modified_count
        after = docs[-1]["_id"]

