"""A bounded least-recently-used mapping, for facts that never change once stored."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

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
