"""A batch's progress, read from its corrections' own states: the batch keeps no copy it
would have to keep in step. `progress` gives each requested item its correction's
status (REQUESTED while no worker has recorded it), and the state the batch ends in once
nothing is left to come.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from contracts.bulk.model import BulkBatch, BulkItem
from contracts.bulk.states import BATCH_LIFECYCLE, SKIPPED, BatchState, ItemState
from contracts.corrections.states import CorrectionStatus

__all__ = ["ending", "progress"]

_FAILED = frozenset({ItemState.FAILED, ItemState.CANCELLED, ItemState.REFUSED})
"""Outcomes that leave a match uncorrected (a correction cancelled on its own counts:
the batch asked for it)."""


def _item(item: BulkItem, statuses: Mapping[str, CorrectionStatus]) -> BulkItem:
    if item.state in SKIPPED or item.state is ItemState.PLANNED:
        return item
    status = statuses.get(item.correction_id)
    state = ItemState(status.value) if status is not None else ItemState.REQUESTED
    return item if state is item.state else item.model_copy(update={"state": state})


def ending(batch: BulkBatch) -> BatchState | None:
    """The state a RUNNING batch moves to now that its items settled; None: not yet."""
    if batch.state is not BatchState.RUNNING or not batch.settled:
        return None
    if any(i.state in _FAILED for i in batch.items):
        return BatchState.PARTIALLY_FAILED
    return BatchState.COMPLETED


def progress(batch: BulkBatch, statuses: Mapping[str, CorrectionStatus],
             at: datetime) -> BulkBatch:
    """The batch with its items as their corrections stand, and its ending if they
    all settled (checked against the lifecycle)."""
    items = [_item(i, statuses) for i in batch.items]
    moved = batch if items == batch.items else batch.with_items(items, at)
    end = ending(moved)
    if end is None:
        return moved
    BATCH_LIFECYCLE.check(moved.state, end)
    return moved.model_copy(update={"state": end, "updated_at": at})
