"""The deliveries the recorder nak'ed while their parent was not stored, by parent, so
they are woken once a batch stores it.

Why: a decision whose parent is not stored yet is nak'ed with a backoff (up to 5 s), and
JetStream redelivers it after that delay whatever happens meanwhile. A chain of them (a
deep plan whose messages came before their parents, as after a take-over) was then
recorded one level per backoff: in a fault run 31 levels took 88 s, and on a slower
machine acknowledged decisions outlasted the parent wait and were dead-lettered
(ADR 0037). So the recorder remembers each such delivery's ack subject under the parent
it waits for, and once a batch stores that parent it naks the delivery again without a
delay: JetStream honours a second nak of a delivery still pending and queues it for
redelivery at once. The deliveries waiting for those are woken with them, and theirs,
down the chain: they come back together, in stream order, so a batch records the chain
whole instead of one level per batch (a level per batch still took 30 s on a loaded
machine, where a batch took seconds).

Bounded: at most `limit` deliveries are remembered (those past their delay are dropped
first; beyond that a delivery simply waits its backoff), and one whose delay has passed
is not woken (it is being redelivered already; waking it would deliver it twice).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

WAKE_LIMIT = 50_000
"""Deliveries remembered at most (a few MB of ack subjects)."""


@dataclass(frozen=True, slots=True)
class _Sleeper:
    decision_id: str
    reply: str
    due: float
    """When JetStream redelivers it anyway (this process's monotonic clock)."""


class ParentWakes:
    def __init__(self, limit: int = WAKE_LIMIT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._clock = clock
        self._by_parent: dict[str, list[_Sleeper]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def sleep(self, parent_id: str, decision_id: str, reply: str, delay: float) -> None:
        """The delivery of `decision_id` (ack subject `reply`) was nak'ed for `delay` s,
        waiting for `parent_id`."""
        if self._count >= self._limit:
            self._prune()
            if self._count >= self._limit:
                return
        self._by_parent.setdefault(parent_id, []).append(
            _Sleeper(decision_id, reply, self._clock() + delay))
        self._count += 1

    def wake(self, stored: Iterable[str]) -> list[str]:
        """The ack subjects of the deliveries waiting for these decisions, now stored,
        and of those waiting for them, down the chain, in that order; each forgotten
        here, and left out if its delay has passed (it is being redelivered)."""
        now = self._clock()
        woken: list[str] = []
        todo = list(stored)
        while todo:
            sleepers = self._by_parent.pop(todo.pop(0), None)
            if sleepers is None:
                continue
            self._count -= len(sleepers)
            woken.extend(s.reply for s in sleepers if s.due > now)
            todo.extend(s.decision_id for s in sleepers)
        return woken

    def clear(self) -> None:
        self._by_parent.clear()
        self._count = 0

    def _prune(self) -> None:
        now = self._clock()
        for parent in list(self._by_parent):
            left = [s for s in self._by_parent[parent] if s.due > now]
            self._count -= len(self._by_parent[parent]) - len(left)
            if left:
                self._by_parent[parent] = left
            else:
                del self._by_parent[parent]
