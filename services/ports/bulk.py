"""What bulk corrections use: the batches' store (store/bulk.py) and the operator's
correction client (clients/operator.py), which sends each correction exactly as a
single `agents plan correct` does."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Protocol

from contracts.bulk.model import BulkBatch, BulkItem
from contracts.bulk.states import BatchState
from contracts.corrections.states import CorrectionMode, CorrectionStatus

__all__ = ["BulkBatches", "CorrectionSender"]


class BulkBatches(Protocol):
    async def insert(self, batch: BulkBatch) -> None: ...

    async def get(self, batch_id: str) -> BulkBatch | None: ...

    async def recent(self, limit: int, before: str | None = None) -> list[BulkBatch]:
        """Newest first."""
        ...

    async def claim(self, batch_id: str, items: Sequence[BulkItem], at: datetime) -> bool:
        """Mark the items REQUESTED while the batch is REQUESTED; False: it moved on."""
        ...

    async def move(self, batch_id: str, sources: Collection[BatchState], to: BatchState,
                   at: datetime, items: Iterable[BulkItem] = ()) -> bool: ...

    async def note_items(self, batch_id: str, state: BatchState, items: Iterable[BulkItem],
                         at: datetime) -> bool: ...

    async def correction_statuses(self, correction_ids: Iterable[str]
                                  ) -> dict[str, CorrectionStatus]: ...


class CorrectionSender(Protocol):
    async def request(self, plan_id: str, decision_id: str, mode: CorrectionMode,
                      guidance: str | None = None, *, chosen_option: str | None = None,
                      requested_by: str | None = None,
                      correction_id: str | None = None) -> str: ...

    async def cancel(self, correction_id: str, plan_id: str,
                     reason: str | None = None) -> None: ...
