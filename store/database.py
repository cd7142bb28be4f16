"""Connection, collection names and indexes: everything MongoDB-specific about setup."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, IndexModel
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

Document = dict[str, Any]

DECISIONS = "decisions"
PLANS = "plans"
DEAD_LETTERS = "dead_letters"
CORRECTIONS = "corrections"
CORRECTION_ATTEMPTS = "correction_attempts"
OUTBOX = "outbox"
PLAN_LOCKS = "plan_locks"
LEASE_FENCES = "lease_fences"
"""Per recorder partition lease, its last taker: what every batch's transaction writes
on that condition (store.leases.fence_lease)."""
WORKERS = "workers"
INVARIANTS = "invariants"
INVARIANT_VIOLATIONS = "invariant_violations"
DELIVERY_FAILURES = "delivery_failures"
PARENT_WAITS = "parent_waits"
INVARIANT_VERSIONS = "invariant_versions"
DECISION_HOLDS = "decision_holds"
PLAN_USES = "plan_uses"
APPROVALS = "approvals"
APPROVAL_VERDICTS = "approval_verdicts"
COMMENTS = "comments"

_INDEXES: dict[str, list[IndexModel]] = {
    DECISIONS: [
        IndexModel([("plan_id", ASCENDING), ("sequence_number", ASCENDING)], unique=True,
                   name="plan_sequence_unique"),
        # One root per plan, enforced by the server even when two workers race. A revert
        # of the root records a corrected root (is_correction) beside the original.
        IndexModel([("plan_id", ASCENDING)], unique=True, name="one_root_per_plan",
                   partialFilterExpression={"decision_type": "prompt_definition",
                                            "is_correction": False}),
        # Children by parent link, in sequence order: every tree walk goes through it,
        # and a page of a decision's children is read in order without sorting them all.
        # (No index for the current tree: it is read per plan through
        # plan_sequence_unique, and each secondary index costs a third or more of the
        # insert rate; this one replaced `children`, on the parent link alone.)
        IndexModel([("parent_decision_id", ASCENDING), ("sequence_number", ASCENDING)],
                   name="children_in_order"),
        # Search (contracts.decisions.search): one multikey index over each decision's
        # words and facets (type, agent, artifact paths), newest first within a token,
        # serves every indexed filter, so recording pays for one index, not one per filter.
        IndexModel([("search_tokens", ASCENDING), ("_id", DESCENDING)], name="search_tokens"),
    ],
    DEAD_LETTERS: [
        IndexModel([("plan_id", ASCENDING), ("rejected_at", ASCENDING)], name="by_plan"),
        IndexModel([("rejected_at", ASCENDING)], name="by_time"),
        # The gauges and `agents status`: dead letters kept (not discarded) counted by
        # the first rule that ended them, one count per rule.
        IndexModel([("discarded_at", ASCENDING), ("errors.0.rule", ASCENDING)],
                   name="kept_by_first_rule"),
    ],
    # A plan's unfinished corrections, oldest arrival first: what a lease holder works through.
    CORRECTIONS: [
        IndexModel([("plan_id", ASCENDING), ("arrival", ASCENDING)], name="by_plan_arrival"),
        # The recovery sweep: which plans have corrections left unfinished.
        IndexModel([("status", ASCENDING), ("plan_id", ASCENDING)], name="unfinished"),
        # A runner's next correction: the oldest of each unfinished status of its plan.
        IndexModel([("plan_id", ASCENDING), ("status", ASCENDING), ("arrival", ASCENDING)],
                   name="by_plan_status"),
        # A decision's panel: the corrections that targeted it or wrote it.
        IndexModel([("decision_id", ASCENDING)], name="by_target"),
        IndexModel([("new_decision_id", ASCENDING)], name="by_new_decision",
                   partialFilterExpression={"new_decision_id": {"$type": "string"}}),
        # The gauges: how many are in flight in each status, and since when.
        IndexModel([("status", ASCENDING), ("requested_at", ASCENDING)],
                   name="by_status_age"),
    ],
    # Attempts are few (one or two per correction), so an index per lookup the
    # specified API and the RESTRICT rule need costs little.
    CORRECTION_ATTEMPTS: [
        IndexModel([("correction_id", ASCENDING), ("created_at", ASCENDING)],
                   name="by_correction"),
        IndexModel([("plan_id", ASCENDING), ("created_at", ASCENDING)], name="by_plan"),
        IndexModel([("original_decision_id", ASCENDING)], name="by_original_decision"),
        IndexModel([("new_decision_id", ASCENDING)], name="by_new_decision",
                   partialFilterExpression={"new_decision_id": {"$type": "string"}}),
    ],
    # Flushing one correction's events in order; the relay scans the (small) rest by time.
    OUTBOX: [
        IndexModel([("correction_id", ASCENDING), ("order", ASCENDING)], name="by_correction"),
    ],
    # One invariant per (name, scope, target): precedence overrides by name across scopes,
    # so two of one name at one scope would leave "which one is in force" to chance.
    # That index leads with name, so the effective-set read by (scope, target) has its own.
    INVARIANTS: [
        IndexModel([("name", ASCENDING), ("scope", ASCENDING), ("scope_target", ASCENDING)],
                   unique=True, name="name_per_scope_unique"),
        IndexModel([("scope", ASCENDING), ("scope_target", ASCENDING)], name="by_target"),
    ],
    # The recorder asks once per batch which of its plans have an unresolved blocking
    # violation; resolved_at is stored as null until resolved, so the prefix serves it.
    INVARIANT_VIOLATIONS: [
        IndexModel([("plan_id", ASCENDING), ("resolved_at", ASCENDING),
                    ("severity", ASCENDING)], name="by_plan_open"),
        IndexModel([("reported_at", ASCENDING)], name="by_time"),
        # The gauges: open violations counted by severity.
        IndexModel([("resolved_at", ASCENDING), ("severity", ASCENDING)],
                   name="open_by_severity"),
    ],
    # Held decisions: a plan's by status (pending approvals), and the judge's queue.
    DECISION_HOLDS: [
        IndexModel([("plan_id", ASCENDING), ("status", ASCENDING)], name="by_plan_status"),
        IndexModel([("status", ASCENDING), ("claimed_until", ASCENDING)], name="by_status"),
    ],
    # Approvals: a plan's pending ones (the recorder's phase rule), the queue, the expiry
    # sweep's due ones.
    APPROVALS: [
        IndexModel([("plan_id", ASCENDING), ("status", ASCENDING)], name="by_plan_status"),
        IndexModel([("status", ASCENDING), ("expires_at", ASCENDING)], name="by_due"),
    ],
    # A decision's comments, in the order they were made (comment IDs are ULIDs).
    COMMENTS: [IndexModel([("decision_id", ASCENDING), ("_id", ASCENDING)],
                          name="by_decision"),
               IndexModel([("plan_id", ASCENDING), ("_id", ASCENDING)], name="by_plan")],
    # Retention finds due plans by status (then their age), and a plan's family by its
    # children: each an index lookup, however many plans the ledger holds.
    PLANS: [
        IndexModel([("status", ASCENDING), ("_id", ASCENDING)], name="by_status"),
        IndexModel([("parent_plan_id", ASCENDING)], name="by_parent"),
    ],
    # The startup sweep looks for a consumer's messages that failed MaxDeliver times.
    DELIVERY_FAILURES: [
        IndexModel([("consumer", ASCENDING), ("count", ASCENDING)], name="by_consumer"),
    ],
}


DURABLE_OPTIONS: dict[str, Any] = {
    "w": "majority",
    "journal": True,
    "readConcernLevel": "majority",
    "retryWrites": True,
    "retryReads": True,
}
"""What every client of the store is made with, whatever the URI or the server's default
says (keyword options override the URI's): a write is acknowledged once a majority of
the replica set has it in its journal, so a failover cannot roll back a decision whose
JetStream message was acked; reads see only majority-committed data, so nothing read
can vanish in a rollback; a write or read cut by a failover is retried once on the new
primary. On a single node (SecantusDB, a standalone mongod) majority is that node."""


def connect(uri: str, **options: Any) -> AsyncMongoClient[Document]:
    """A client with DURABLE_OPTIONS; `options` add to them (timeouts, say)."""
    # tz_aware: datetimes come back as UTC-aware, equal to what the models hold.
    return AsyncMongoClient(uri, tz_aware=True, **{**options, **DURABLE_OPTIONS})


async def replica_set_name(client: AsyncMongoClient[Document]) -> str | None:
    """The `setName` the server reports in `hello`; None for a standalone server."""
    hello = await client.admin.command("hello")
    name = hello.get("setName")
    return str(name) if name else None


REPLACED: dict[str, tuple[str, ...]] = {DECISIONS: ("children",)}
"""Indexes an earlier version created that a new one (a longer key) now serves: dropped
once their replacement exists, so every insert does not pay for both."""


async def ensure_indexes(db: AsyncDatabase[Document]) -> None:
    """Create every index; safe to run at every start (create_indexes is idempotent).
    Then drop the replaced ones still there."""
    for name, indexes in _INDEXES.items():
        await db[name].create_indexes(indexes)
    for name, old in REPLACED.items():
        have = {i["name"] async for i in await db[name].list_indexes()}
        for index in old:
            if index in have:
                await db[name].drop_index(index)


ID_CHUNK = 50
"""Largest `$in` list per query. SecantusDB's `$in` slows down faster than linearly with
the list (500 IDs: 0.53 s; 10 queries of 50: 0.13 s, measured); mongod is indifferent."""


def id_chunks(ids: Iterable[str]) -> list[list[str]]:
    """The distinct `ids`, first seen first, in lists of at most ID_CHUNK: one `$in`
    each."""
    unique = list(dict.fromkeys(ids))
    return [unique[i:i + ID_CHUNK] for i in range(0, len(unique), ID_CHUNK)]


async def find_by_ids(coll: AsyncCollection[Document], ids: Iterable[str],
                      projection: dict[str, Any] | None = None) -> list[Document]:
    """Documents whose _id is in `ids`, fetched in chunks of ID_CHUNK concurrently."""
    chunks = id_chunks(ids)
    results = await asyncio.gather(*[
        coll.find({"_id": {"$in": chunk}}, projection).to_list() for chunk in chunks])
    return [doc for docs in results for doc in docs]
