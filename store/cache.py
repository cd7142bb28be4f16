"""A bounded least-recently-used mapping, for facts that never change once stored, and
the recorder's caches made of it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from store.sequences import Counter

K = TypeVar("K")
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self._capacity:
            self._data.popitem(last=False)

    def get(self, key: K) -> V | None:
        if key not in self._data:
            return None
        return self[key]

    def __len__(self) -> int:
        return len(self._data)

    def discard(self, key: K) -> None:
        """Forget a key: for the rare fact that stops being true (a deleted decision)."""
        self._data.pop(key, None)


PLAN_OF_CACHE = 200_000
PARENT_PLAN_CACHE = 100_000


@dataclass
class RecorderCache:
    """What the recorder remembers between batches: facts that never change once stored."""

    plan_of: LRUCache[str, tuple[str, int]] = field(
        default_factory=lambda: LRUCache(PLAN_OF_CACHE))
    """decision_id -> plan_id of decisions known to be stored. Both are immutable and
    decisions are only ever added, so a parent seen once need not be read again: in a
    steady stream nearly every parent was written moments ago by this worker. The epoch
    beside the plan is the plan's correction epoch when the decision was last seen
    current: only a revert supersedes, and every revert bumps the epoch."""
    created_at: LRUCache[str, datetime] = field(
        default_factory=lambda: LRUCache(PLAN_OF_CACHE))
    """decision_id -> created_at of decisions known to be stored (immutable): what a
    child's created_at is compared with (created_before_parent)."""
    parent_plan: LRUCache[str, str] = field(
        default_factory=lambda: LRUCache(PARENT_PLAN_CACHE))
    """plan_id -> parent plan_id: a plan's parent, once recorded, never changes."""


class CounterGuesses:
    """Each plan's counter as this process's last committed batch left it: a batch of one
    plan (the usual batch at low load) then reads and writes its counter in one round
    trip, as before the chain; a wrong guess (another writer came between) costs the
    read it saved."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._known: LRUCache[str, Counter] = LRUCache(capacity)
        self.pending: dict[str, Counter] = {}
        """What the last run of the transaction wrote: `committed` keeps it."""

    def guess(self, plan_ids: Collection[str]) -> tuple[str, Counter] | None:
        if len(plan_ids) != 1:
            return None
        [plan_id] = plan_ids
        known = self._known.get(plan_id)
        return (plan_id, known) if known is not None else None

    def committed(self) -> None:
        for plan_id, counter in self.pending.items():
            self._known[plan_id] = counter
        self.pending = {}
