"""Bulk corrections: request one correction per match of a filter as a batch, follow it,
cancel it (`agents bulk`, the console's Bulk page).

Each correction is requested exactly as `agents plan correct` requests one: through the
operator's correction client, signed by the operator's key, one ordinary
CorrectionRequest on `corrections.requested.<plan_id>`, so the workers verify, scope,
analyse and apply it as any other (docs/decisions/0035). The batch itself is the
operator's bookkeeping in the store: which matches it chose, which it skipped and why,
which correction ID each got. Those IDs are derived from the batch and decision IDs, so
requesting the same batch again (a crash, a timeout, a second click) re-sends the same
messages, which JetStream and the workers drop as duplicates.

Sending is claimed a chunk at a time by a write conditional on the batch still being
REQUESTED, so a cancel that moved it on stops the loop at the next chunk, whatever
process runs it; the cancel then asks each correction not yet executing to cancel
through the ordinary cancel path, and never undoes an applied one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from contracts.bulk.model import BulkBatch, BulkFilter
from contracts.bulk.progress import progress
from contracts.bulk.states import (
    CANCELLABLE,
    CANCELLABLE_ITEMS,
    BatchEnded,
    BatchNotFound,
    BatchState,
    BulkError,
    ItemState,
)
from contracts.corrections.states import CorrectionMode
from contracts.shared.timestamps import utc_now
from contracts.trust.policy import Identity
from services.bulk_preview import Matched, preview
from services.ports.bulk import BulkBatches, CorrectionSender
from services.read_ports import LedgerReads

__all__ = ["SEND_CHUNK", "BatchMismatch", "BulkService"]

SEND_CHUNK = 20
"""Items claimed per conditional write: a cancel stops the sending within one chunk."""


class BatchMismatch(BulkError):
    def __init__(self, batch_id: str) -> None:
        super().__init__(f"bulk batch {batch_id} was requested with another filter, mode "
                         f"or guidance; a re-run must ask the same (or use a new batch ID)")


class BulkService:
    def __init__(self, reads: LedgerReads, batches: BulkBatches, *, bound: int,
                 scan_max: int, max_decisions: int,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._reads, self._batches = reads, batches
        self._bound, self._scan_max, self._max_decisions = bound, scan_max, max_decisions
        self._clock = clock

    async def preview(self, where: BulkFilter, mode: CorrectionMode, *, batch_id: str,
                      identity: Identity) -> Matched:
        return await preview(self._reads, where, mode, batch_id=batch_id, identity=identity,
                             bound=self._bound, scan_max=self._scan_max,
                             max_decisions=self._max_decisions)

    async def create(self, where: BulkFilter, mode: CorrectionMode, guidance: str | None,
                     reason: str, *, batch_id: str, identity: Identity,
                     requested_by: str) -> BulkBatch:
        """The batch `batch_id`: recorded now from a fresh preview, or, when it already
        is, the recorded one (the same filter, mode and guidance asked again)."""
        found = await self._batches.get(batch_id)
        if found is not None:
            if (found.filter, found.mode, found.guidance) != (where, mode, guidance):
                raise BatchMismatch(batch_id)
            return found
        matched = await self.preview(where, mode, batch_id=batch_id, identity=identity)
        now = self._clock()
        batch = BulkBatch(batch_id=batch_id, filter=where, mode=mode, guidance=guidance,
                          reason=reason,
                          operator=identity.principal.name if identity else None,
                          requested_by=requested_by, items=matched.preview.items,
                          created_at=now, updated_at=now)
        await self._batches.insert(batch)
        return batch

    async def send(self, batch: BulkBatch, sender: CorrectionSender,
                   on_chunk: Callable[[int], object] | None = None) -> BulkBatch:
        """Request the batch's planned items, a claimed chunk at a time; re-send those
        claimed before whose correction no worker recorded (a run that stopped half-way).
        Returns the batch as it stands after."""
        if batch.state is not BatchState.REQUESTED:
            return await self.refresh(batch.batch_id)
        recorded = await self._batches.correction_statuses(
            i.correction_id for i in batch.requested)
        for item in batch.requested:
            if item.correction_id not in recorded:
                await self._one(batch, item.plan_id, item.decision_id, item.correction_id,
                                sender)
        planned = batch.to_request
        sent = 0
        for start in range(0, len(planned), SEND_CHUNK):
            chunk = planned[start:start + SEND_CHUNK]
            if not await self._batches.claim(batch.batch_id, chunk, self._clock()):
                return await self.refresh(batch.batch_id)
            for item in chunk:
                await self._one(batch, item.plan_id, item.decision_id, item.correction_id,
                                sender)
            sent += len(chunk)
            if on_chunk is not None:
                on_chunk(sent)
        await self._batches.move(batch.batch_id, {BatchState.REQUESTED}, BatchState.RUNNING,
                                 self._clock())
        return await self.refresh(batch.batch_id)

    async def _one(self, batch: BulkBatch, plan_id: str, decision_id: str,
                   correction_id: str, sender: CorrectionSender) -> None:
        await sender.request(plan_id, decision_id, batch.mode, batch.guidance,
                             requested_by=batch.requested_by, correction_id=correction_id)

    async def get(self, batch_id: str) -> BulkBatch:
        found = await self._batches.get(batch_id)
        if found is None:
            raise BatchNotFound(batch_id)
        return found

    async def refresh(self, batch_id: str) -> BulkBatch:
        """The batch with its items as their corrections stand now, recorded (and its
        ending, once every item settled)."""
        batch = await self.get(batch_id)
        statuses = await self._batches.correction_statuses(
            i.correction_id for i in batch.requested)
        now = progress(batch, statuses, self._clock())
        changed = [i for i, was in zip(now.items, batch.items, strict=True) if i != was]
        if now.state is not batch.state:
            moved = await self._batches.move(batch_id, {batch.state}, now.state,
                                             now.updated_at, changed)
            return now if moved else await self.get(batch_id)
        if changed:
            await self._batches.note_items(batch_id, batch.state, changed, now.updated_at)
        return now

    async def recent(self, limit: int, before: str | None = None) -> list[BulkBatch]:
        """Newest first, each refreshed while it has outcomes to come."""
        found = await self._batches.recent(limit, before)
        return [await self.refresh(b.batch_id) if not b.settled or b.state in CANCELLABLE
                else b for b in found]

    async def cancel(self, batch_id: str, sender: CorrectionSender,
                     reason: str | None = None) -> tuple[BulkBatch, int]:
        """Stop requesting, and ask every correction of the batch not yet executing to
        cancel; applied ones stay applied. Returns the batch and the cancels sent."""
        batch = await self.refresh(batch_id)
        if batch.state not in CANCELLABLE:
            raise BatchEnded(batch_id, batch.state)
        if not await self._batches.move(batch_id, CANCELLABLE, BatchState.CANCELLED,
                                        self._clock()):
            raise BatchEnded(batch_id, (await self.get(batch_id)).state)
        # No claim succeeds past the move: what is PLANNED now was never sent.
        after = await self.get(batch_id)
        unsent = [i.model_copy(update={"state": ItemState.NOT_REQUESTED})
                  for i in after.items if i.state is ItemState.PLANNED]
        await self._batches.note_items(batch_id, BatchState.CANCELLED, unsent, self._clock())
        current = await self.refresh(batch_id)
        asked = [i for i in current.items if i.state in CANCELLABLE_ITEMS]
        for item in asked:
            await sender.cancel(item.correction_id, item.plan_id,
                                reason or f"bulk batch {batch_id} cancelled")
        return current, len(asked)
