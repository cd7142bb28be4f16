"""A batch's lifecycle as one transition table, an item's outcome as an enum, and the
named errors of both.

A batch is recorded REQUESTED before its first correction is requested, so a cancel can
stop it half-way; RUNNING once every item was sent (or refused); it ends COMPLETED when
every correction it requested was applied, PARTIALLY_FAILED when one failed or was
cancelled on its own, CANCELLED when an operator stopped it. Ending is derived from the
corrections' states (contracts.bulk.progress), never reported by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from contracts.corrections.states import CANCELLABLE as CORRECTION_CANCELLABLE
from contracts.shared.errors import DomainError
from contracts.shared.lifecycle import Lifecycle


class BatchState(StrEnum):
    REQUESTED = "requested"
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIALLY_FAILED = "partially_failed"
    CANCELLED = "cancelled"


_B = BatchState
BATCH_TRANSITIONS: Mapping[BatchState, frozenset[BatchState]] = MappingProxyType({
    _B.REQUESTED: frozenset({_B.RUNNING, _B.CANCELLED}),
    _B.RUNNING: frozenset({_B.COMPLETED, _B.PARTIALLY_FAILED, _B.CANCELLED}),
    _B.COMPLETED: frozenset(),
    _B.PARTIALLY_FAILED: frozenset(),
    _B.CANCELLED: frozenset(),
})
BATCH_LIFECYCLE = Lifecycle("bulk batch", BATCH_TRANSITIONS, _B.REQUESTED)
CANCELLABLE = BATCH_LIFECYCLE.sources(_B.CANCELLED)
"""States a cancel may stop: nothing is undone, further requests stop."""


class ItemState(StrEnum):
    """What became of one match. The first five are the batch's own verdicts; the rest
    are its correction's status, read back (contracts.corrections.states)."""

    PLANNED = "planned"
    """Not requested yet."""
    COVERED = "covered"
    """Skipped: it lies inside another match's subtree, which that revert supersedes."""
    SUPERSEDED = "superseded"
    """Skipped: already reverted (a revert of it would fail)."""
    REFUSED = "refused"
    """Out of the operator's project scope: never requested."""
    NOT_REQUESTED = "not_requested"
    """The batch was cancelled before its turn."""
    REQUESTED = "requested"
    """Sent; no worker has recorded it yet (queued)."""
    PENDING = "pending"
    ANALYZING = "analyzing"
    EXECUTING = "executing"
    APPLIED = "applied"
    FAILED = "failed"
    CANCELLED = "cancelled"


SKIPPED = frozenset({ItemState.COVERED, ItemState.SUPERSEDED, ItemState.REFUSED,
                     ItemState.NOT_REQUESTED})
"""Items the batch never requested."""
UNSETTLED = frozenset({ItemState.PLANNED, ItemState.REQUESTED, ItemState.PENDING,
                       ItemState.ANALYZING, ItemState.EXECUTING})
"""Items whose outcome is still to come."""
CANCELLABLE_ITEMS = frozenset({ItemState.REQUESTED,
                               *(ItemState(s.value) for s in CORRECTION_CANCELLABLE)})
"""Items a batch cancel asks to cancel: sent but not recorded yet, or a correction whose
own lifecycle still allows a cancel (contracts.corrections.states)."""


class BulkError(DomainError):
    """Base of the bulk corrections' named errors."""


class TooManyMatches(BulkError):
    """The filter matches more decisions than BULK_MAX_MATCHES allows in one batch."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        super().__init__(
            f"the filter matches more than {bound:,} decisions (BULK_MAX_MATCHES); "
            f"narrow it (--since, --until, --path, --agent, --type, words) or raise the "
            f"bound")


class NothingMatches(BulkError):
    """A batch of no item would be an empty promise: refused."""

    def __init__(self) -> None:
        super().__init__("the filter matches no decision; nothing to request")


class BatchNotFound(BulkError):
    def __init__(self, batch_id: str) -> None:
        self.batch_id = batch_id
        super().__init__(f"no bulk batch {batch_id} is recorded")


class BatchEnded(BulkError):
    """A cancel (or a resumed request) of a batch that already ended."""

    def __init__(self, batch_id: str, state: BatchState) -> None:
        self.batch_id, self.state = batch_id, state
        super().__init__(f"bulk batch {batch_id} is {state.value}: nothing to "
                         f"{'cancel' if state is not BatchState.RUNNING else 'do'}")
