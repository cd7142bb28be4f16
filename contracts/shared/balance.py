"""How the replicas share a family's partitions (contracts.shared.partitions): each live
worker takes its share and no more, so the partitions spread over the workers and move
when one dies, stops or joins.

Every replica reads the same two facts (which worker holds which partition's lease, and
which workers are alive) and computes the same shares from them, so they agree without
talking to each other. A replica over its share releases what it has beyond it (the
last it would choose); one under its share takes free partitions (the first it would
choose). The leases decide any race: a partition is taken only once its holder
released it or its lease expired. Pure: no I/O.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass


def shares(count: int, live: Collection[str], held: Mapping[str, int]) -> dict[str, int]:
    """How many of `count` partitions each live worker should hold: count // W each, one
    more for count % W of them: those holding the most now (then the lowest ID), so an
    assignment that is already even stays as it is."""
    order = sorted(live, key=lambda w: (-held.get(w, 0), w))
    base, extra = divmod(count, len(order))
    return {w: base + (1 if i < extra else 0) for i, w in enumerate(order)}


def preference(worker: str, partition: str) -> int:
    """A worker's own order of the partitions (rendezvous hashing): two workers looking
    for free partitions at once mostly try different ones first."""
    return zlib.crc32(f"{worker}/{partition}".encode())


@dataclass(frozen=True, slots=True)
class Moves:
    release: tuple[str, ...] = ()
    """Held partitions to let go of, least preferred first."""
    take: tuple[str, ...] = ()
    """Free partitions to try, most preferred first..."""
    wanted: int = 0
    """...until this many more are held."""


def moves(me: str, partitions: Sequence[str], mine: Collection[str],
          holders: Mapping[str, str], live: Collection[str]) -> Moves:
    """What `me`, holding `mine`, should do, given the partitions' current `holders`
    (leases not expired) and the `live` workers (`me` counts as one)."""
    everyone = {*live, me}
    held = Counter(w for p, w in holders.items() if w in everyone and w != me
                   and p in partitions)
    held[me] = len(mine)
    share = shares(len(partitions), everyone, held)[me]
    ranked = sorted(partitions, key=lambda p: preference(me, p), reverse=True)
    if len(mine) > share:
        extra = [p for p in reversed(ranked) if p in mine][:len(mine) - share]
        return Moves(release=tuple(extra))
    free = tuple(p for p in ranked if p not in holders and p not in mine)
    return Moves(take=free, wanted=share - len(mine))
