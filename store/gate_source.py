"""What the recorder's gate needs of the store for a batch (contracts.invariants.gate):
the invariants as of their current version, and of the batch's plans their project and
template, their pending approvals and, when a check reads `path`, the type chains of the
stored parents.

The version is one small document that every change of the invariants increments
(`bump_version`); each batch reads it, and the set is loaded and compiled again only
when it moved. When no invariant has a check (and no judge rules on word-only ones) a
batch costs that one read and nothing more. Chains are cached (a stored decision's
type and parent never change); a plan's project and template are read per batch, since
`agents plan use` changes a template.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.invariants.activation import MAX_LIST_ENTRIES, PlanScope
from contracts.invariants.gate import GateInputs
from contracts.invariants.rules import RuleSet
from store.cache import LRUCache
from store.database import DECISIONS, INVARIANT_VERSIONS, INVARIANTS, PLANS, Document, find_by_ids
from store.gate_sink import GateSink
from store.invariants import VERSION_ID, invariant_from_document

CHAIN_CACHE = 200_000


class GateSource:
    def __init__(self, db: AsyncDatabase[Document], sink: GateSink, *,
                 judge: bool = False) -> None:
        self._db = db
        self._sink = sink
        self._judge = judge
        self._rules: RuleSet | None = None
        self._chains: LRUCache[str, tuple[str, ...]] = LRUCache(CHAIN_CACHE)

    async def inputs(self, decisions: Sequence[Decision]) -> GateInputs:
        """The gate's inputs for a batch of these decisions (ancestors are the batch
        facts', added by the caller)."""
        plans = {d.plan_id for d in decisions}
        rules, approvals = await asyncio.gather(self.rules(),
                                                self._sink.pending_approvals(plans))
        if not rules.gates:
            return GateInputs(rules, approvals=approvals)
        scopes, chains = await asyncio.gather(
            self._scopes(plans),
            self._chains_for(decisions) if rules.reads_path() else _nothing())
        return GateInputs(rules, scopes, {}, approvals, chains)

    async def rules(self) -> RuleSet:
        """The invariants as of the stored version (read now; loaded when it moved)."""
        doc = await self._db[INVARIANT_VERSIONS].find_one({"_id": VERSION_ID})
        version = int(doc["version"]) if doc else 0
        if self._rules is None or self._rules.version != version:
            found = [invariant_from_document(d) async for d in self._db[INVARIANTS].find({})]
            self._rules = RuleSet.of(version, found, judge=self._judge)
        return self._rules

    def remember(self, chains: Mapping[str, tuple[str, ...]]) -> None:
        """Chains of decisions just committed."""
        for decision_id, chain in chains.items():
            self._chains[decision_id] = chain

    async def _scopes(self, plans: set[str]) -> dict[str, PlanScope]:
        docs = await find_by_ids(self._db[PLANS], plans, {"project": 1, "action_template": 1})
        return {d["_id"]: PlanScope(d.get("project"), d.get("action_template")) for d in docs}

    async def _chains_for(self, decisions: Sequence[Decision]) -> dict[str, tuple[str, ...]]:
        """Chains of the stored parents: from the cache, else read up the tree a level
        per query (at most MAX_LIST_ENTRIES levels: a deeper path is not evaluated)."""
        ids = {d.decision_id for d in decisions}
        wanted = {d.parent_decision_id for d in decisions
                  if d.parent_decision_id is not None and d.parent_decision_id not in ids}
        known = {p: c for p in wanted if (c := self._chains.get(p)) is not None}
        links: dict[str, tuple[str | None, str]] = {}
        todo = wanted - known.keys()
        for _ in range(MAX_LIST_ENTRIES):
            if not todo:
                break
            docs = await find_by_ids(self._db[DECISIONS], todo,
                                     {"parent_decision_id": 1, "decision_type": 1})
            links.update({d["_id"]: (d.get("parent_decision_id"), d["decision_type"])
                          for d in docs})
            todo = {p for p, _ in (links[d["_id"]] for d in docs)
                    if p is not None and p not in links and self._chains.get(p) is None}
        for p in wanted - known.keys():
            chain = _chain(p, links, self._chains)
            if chain is not None:
                known[p] = self._chains[p] = chain
        return known


def _chain(decision_id: str, links: Mapping[str, tuple[str | None, str]],
           cached: LRUCache[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """Types from the root down to `decision_id`, or None if a link is missing."""
    types: list[str] = []
    current: str | None = decision_id
    while current is not None and len(types) <= MAX_LIST_ENTRIES:
        hit = cached.get(current)
        if hit is not None:
            return (*hit, *reversed(types))
        link = links.get(current)
        if link is None:
            return None
        types.append(link[1])
        current = link[0]
    return tuple(reversed(types)) if current is None else None


async def _nothing() -> dict[str, tuple[str, ...]]:
    return {}

