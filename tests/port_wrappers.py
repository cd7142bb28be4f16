"""Ports that do something at the worst moment: races set up through the store's ports
(the same on the memory store and the real one), instead of patching a service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from contracts.impact import CorrectionImpact, ImpactWalk
from services.ports import ImpactReads


class ImpactThen:
    """The impact port, doing `then` after each analysis: the tree (or the correction,
    or the lease) changes between the walk and the commit that relies on it."""

    def __init__(self, inner: ImpactReads, then: Callable[[int], Awaitable[None]]) -> None:
        self._inner = inner
        self._then = then
        self.calls = 0

    async def walk(self, target_decision_id: str, limit: int | None = None) -> ImpactWalk:
        return await self._inner.walk(target_decision_id, limit)

    async def impact(self, target_decision_id: str, limit: int | None = None
                     ) -> CorrectionImpact:
        found = await self._inner.impact(target_decision_id, limit)
        self.calls += 1
        await self._then(self.calls)
        return found
