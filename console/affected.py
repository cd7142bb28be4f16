"""Which decisions a correction of a target would affect, for highlighting the dry run on
the tree past the first 100 IDs the dry-run reply lists.

The page asks for the nodes it draws (a level, "load more", the tree reopened), so the
whole set never travels to the browser; the walk behind it (store/impact.py, the
dry run's own) is begun by each dry run whose reply is cut and kept briefly, since a
page asks again for each level it opens. The walk stops past `WALK_MAX` decisions: a
10,000-decision plan is walked whole, a bigger subtree is highlighted as far as it was
walked and the answer says `complete: false`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from contracts.impact.walk import ImpactWalk

WALK_MAX = 20_000
"""Decisions walked at most for one target (the dry run's own limit is the policy's)."""
KEEP_SECONDS = 60.0
"""How long a walk answers for its target: a dry run's report stays on screen that long
or is asked again; a tree changed meanwhile is caught up by the next dry run."""
KEEP_TARGETS = 8


@dataclass(frozen=True, slots=True)
class AffectedSet:
    target: str
    ids: frozenset[str]
    complete: bool
    """False when the walk stopped at WALK_MAX."""


class AffectedSets:
    """The affected sets of the last few targets, each walked once while it is kept."""

    def __init__(self, keep_seconds: float = KEEP_SECONDS, keep: int = KEEP_TARGETS) -> None:
        self._keep_seconds = keep_seconds
        self._keep = keep
        self._held: OrderedDict[str, tuple[float, asyncio.Task[AffectedSet]]] = OrderedDict()

    def start(self, target: str, walk: Callable[[str, int], Awaitable[ImpactWalk]]) -> None:
        """A fresh walk for the target, begun now and not awaited: a new dry run's (the
        tree may have changed since the last one), ready by the time its page asks."""
        task = asyncio.ensure_future(self._walked(target, walk))
        # Whoever asks sees a failure; nobody asking must not leave it "never retrieved".
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self._held[target] = (time.monotonic(), task)
        self._bound(target)

    async def of(self, target: str,
                 walk: Callable[[str, int], Awaitable[ImpactWalk]]) -> AffectedSet:
        """`walk(target, limit)` is called once per target while its set is kept; pages
        asking at the same moment share it."""
        now = time.monotonic()
        held = self._held.get(target)
        if held is None or now - held[0] > self._keep_seconds \
                or (held[1].done() and (held[1].cancelled()
                                        or held[1].exception() is not None)):
            held = (now, asyncio.ensure_future(self._walked(target, walk)))
            self._held[target] = held
        self._bound(target)
        return await asyncio.shield(held[1])

    def _bound(self, latest: str) -> None:
        self._held.move_to_end(latest)
        while len(self._held) > self._keep:
            self._held.popitem(last=False)

    @staticmethod
    async def _walked(target: str, walk: Callable[[str, int], Awaitable[ImpactWalk]]
                      ) -> AffectedSet:
        done = await walk(target, WALK_MAX)
        return AffectedSet(target, frozenset(v.decision_id for v in done.affected),
                           not done.exceeded)
