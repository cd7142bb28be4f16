"""The decisions collection as the recorder uses it: the facts a batch is triaged
against (store.batch_facts) and the batch's insert (store.batch_insert), with the caches
only the recorder needs. The other services read through store.decisions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from contracts.decisions.model import Decision
from contracts.invariants.outcomes import GateEffects
from contracts.recording.facts import StoredFacts
from contracts.recording.message import Candidate
from contracts.shared.persistence import LeaseFence
from contracts.trust.ownership import Ownership
from store.batch_facts import BatchFacts
from store.batch_insert import StaleFacts, insert_batch, laid_out
from store.cache import PARENT_PLAN_CACHE, CounterGuesses, RecorderCache
from store.database import DECISIONS, Document, find_by_ids
from store.decisions import from_document
from store.gate_sink import GateSink, HoldSink
from store.leases import fence_lease
from store.transactions import run_in_transaction
from store.translate import translate_errors

DUPLICATE_KEY = 11000


@translate_errors
class RecorderRepository:
    def __init__(self, db: AsyncDatabase[Document], sink: GateSink | None = None) -> None:
        self._client = db.client
        self._db = db
        self.sink: GateSink = sink or HoldSink(db)
        """Records the invariants' gate's effects in the batch's transaction."""
        self._decisions = db[DECISIONS]
        self._cache = RecorderCache()
        self._counters = CounterGuesses(PARENT_PLAN_CACHE)
        self._facts = BatchFacts(db, self._cache)

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]:
        return {d["_id"]: from_document(d)
                for d in await find_by_ids(self._decisions, decision_ids)}

    def lay_out(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        return laid_out(candidates)

    async def facts_for(self, candidates: Sequence[Candidate], *,
                        existing: bool = True) -> StoredFacts:
        """The lookups `triage_batch` needs, each by an index (store.batch_facts).
        `existing=False` skips asking which of the candidates are stored already (the
        facts then say none is; the recorder's first try at a batch of first
        deliveries)."""
        return await self._facts.read(candidates, existing=existing)

    async def insert_recorded(self, accepted: Sequence[Candidate], now: datetime,
                              epochs: Mapping[str, int] | None = None,
                              ownership: Mapping[str, Ownership] | None = None,
                              effects: GateEffects | None = None, *,
                              fence: LeaseFence | None = None) -> list[Decision] | None:
        """Number and chain the decisions per plan, in the given order, and insert them with
        one bulk write, all in one transaction. None means a concurrent writer stored one
        of these IDs (or its plan's root) first, or a correction changed one of their plans
        since `epochs` (the facts' epochs; None: not checked) were read, or a plan got an
        owner other than `ownership` says (the facts'; None: not checked): nothing was
        written, and the caller plans again. `effects`: what the invariants' gate decided,
        written by `sink` in the same transaction (even when nothing is accepted).
        `fence`: the partition's lease, whose fence record the transaction writes
        (store.leases.fence_lease); LeaseLost (nothing written) once another replica
        took the lease."""
        if not accepted and not effects:
            return []

        async def write(s: AsyncClientSession) -> list[Decision]:
            if fence is not None:
                await fence_lease(self._db, fence, s)
            done = await insert_batch(self._db, accepted, now, s, epochs=epochs,
                                      ownership=ownership,
                                      guesses=self._counters) if accepted else []
            if effects:
                await self.sink.record(effects, now, s)
            return done

        try:
            written = await run_in_transaction(self._client, write)
        except (DuplicateKeyError, StaleFacts):
            return None
        except BulkWriteError as exc:
            if all(e.get("code") == DUPLICATE_KEY
                   for e in exc.details.get("writeErrors", [])):
                return None
            raise
        self._counters.committed()
        for d in written:  # only once committed: current at the epoch the insert checked
            self._cache.plan_of[d.decision_id] = (d.plan_id, (epochs or {}).get(d.plan_id, 0))
            self._cache.created_at[d.decision_id] = d.created_at
        return written
