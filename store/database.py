"""Connection, collection names and indexes: everything MongoDB-specific about setup."""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING, AsyncMongoClient, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

Document = dict[str, Any]

DECISIONS = "decisions"
PLANS = "plans"
DEAD_LETTERS = "dead_letters"
PUBLISHED = "published_events"

_INDEXES: dict[str, list[IndexModel]] = {
    DECISIONS: [
        IndexModel([("plan_id", ASCENDING), ("sequence_number", ASCENDING)], unique=True,
                   name="plan_sequence_unique"),
        # One root per plan, enforced by the server even when two workers race.
        IndexModel([("plan_id", ASCENDING)], unique=True, name="one_root_per_plan",
                   partialFilterExpression={"decision_type": "prompt_definition"}),
        IndexModel([("parent_decision_id", ASCENDING)], name="children"),
        IndexModel([("plan_id", ASCENDING), ("superseded_by", ASCENDING)], name="current_tree"),
    ],
    DEAD_LETTERS: [
        IndexModel([("plan_id", ASCENDING), ("rejected_at", ASCENDING)], name="by_plan"),
        IndexModel([("rejected_at", ASCENDING)], name="by_time"),
    ],
}


def connect(uri: str) -> AsyncMongoClient[Document]:
    # tz_aware: datetimes come back as UTC-aware, equal to what the models hold.
    return AsyncMongoClient(uri, tz_aware=True)


async def ensure_indexes(db: AsyncDatabase[Document]) -> None:
    """Create every index; safe to run at every start (create_indexes is idempotent)."""
    for name, indexes in _INDEXES.items():
        await db[name].create_indexes(indexes)
