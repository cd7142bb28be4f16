"""What an audit reads: a plan's chained records as export lines (contracts.trust.
audit_lines), its counter, the correction that explains a rollback, and which plans
wrote records since a time. Read-only, by the indexes the rest of the store already
keeps (decisions and corrections by plan, violations by plan and by time)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.persistence import ConcurrentChange
from contracts.trust.audit_lines import (
    Line,
    correction_lines,
    decision_lines,
    in_chain_order,
    plan_entry,
    violation_lines,
)
from contracts.trust.audit_lines import since as written_since
from contracts.trust.chain import CORRECTION_END
from store.database import CORRECTIONS, DECISIONS, INVARIANT_VIOLATIONS, PLANS, Document
from store.translate import translate_errors

PlanLines = tuple[dict[str, Any], list[Line]]
"""What the export header says of a plan, and its lines in chain order."""

READ_TRIES = 10
"""Reads of a plan's records before an audit gives up on one moment of a busy plan."""


class PlanKeptChanging(ConcurrentChange):
    """Records were committed into the plan during every one of an audit's reads."""

    def __init__(self, plan_id: str, tries: int) -> None:
        super().__init__(f"plan {plan_id} was written to during each of {tries} reads of "
                         "it; audit it again")


@translate_errors
class AuditReader:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._plans = db[PLANS]
        self._decisions = db[DECISIONS]
        self._corrections = db[CORRECTIONS]
        self._violations = db[INVARIANT_VIOLATIONS]

    async def plan(self, plan_id: str) -> PlanLines | None:
        """A plan's header entry and lines, as of one moment; None if nothing of it is
        stored.

        The records are read between two reads of the plan's counter, which every
        chained write moves in its own transaction: when both reads agree, no record was
        committed meanwhile, so the records are the plan as that counter says. When they
        differ (an agent still recording, a correction committing), the records are read
        again, READ_TRIES times at most, then PlanKeptChanging. Read at once, a record
        committed between the reads looked removed or reordered to the verifier."""
        before = await self._counter(plan_id)
        for _ in range(READ_TRIES):
            decisions, corrections, violations = await asyncio.gather(
                self._decisions.find({"plan_id": plan_id}).to_list(),
                self._corrections.find({"plan_id": plan_id}).to_list(),
                self._violations.find({"plan_id": plan_id}).to_list())
            counter = await self._counter(plan_id)
            if plan_entry(counter) == plan_entry(before):
                break
            before = counter
        else:
            raise PlanKeptChanging(plan_id, READ_TRIES)
        if counter is None and not decisions and not corrections and not violations:
            return None
        lines = [*(ln for d in decisions for ln in decision_lines(d)),
                 *(ln for c in corrections for ln in correction_lines(c)),
                 *(ln for v in violations for ln in violation_lines(v))]
        return plan_entry(counter), in_chain_order(lines, [plan_id])

    async def _counter(self, plan_id: str) -> Document | None:
        return await self._plans.find_one({"_id": plan_id})

    async def export(self, plan_ids: Iterable[str], cut: str | None = None
                     ) -> tuple[dict[str, dict[str, Any]], list[Line]]:
        """The header's plan entries and every line of `plan_ids` in chain order (with
        `cut`, RFC 3339 UTC: each plan from its first chained record written then or
        later; plans with none left out), then the witnesses their rollbacks need."""
        entries: dict[str, dict[str, Any]] = {}
        lines: list[Line] = []
        for plan_id in plan_ids:
            found = await self.plan(plan_id)
            if found is None:
                continue
            entry, plan_lines = found
            if cut is not None:
                plan_lines, start = written_since(plan_lines, cut)
                if start is None:
                    continue
                entry["from_seq"] = start
            entries[plan_id] = entry
            lines += plan_lines
        return entries, lines + await self.witnesses(entries, lines)

    async def witnesses(self, entries: dict[str, dict[str, Any]],
                        present: Iterable[Line]) -> list[Line]:
        """The chained ends of the corrections that rolled these plans back, for those
        not among `present`: each explains its plan's status."""
        have = {ln["record_id"] for ln in present if ln["kind"] == CORRECTION_END}
        wanted = {e["rolled_back_by"] for e in entries.values()
                  if e.get("status") == "rolled_back" and e.get("rolled_back_by")} - have
        if not wanted:
            return []
        docs = await self._corrections.find({"_id": {"$in": sorted(wanted)}}).to_list()
        return [{**ln, "witness": True} for d in docs for ln in correction_lines(d)
                if ln["kind"] == CORRECTION_END]

    async def plans_since(self, since: datetime) -> list[str]:
        """Plans with a record written at or after `since` (a decision created, a
        correction's step, a violation reported or resolved), sorted."""
        found = await asyncio.gather(
            self._decisions.find({"created_at": {"$gte": since}}, {"plan_id": 1}).to_list(),
            self._corrections.find({"history.at": {"$gte": since}}, {"plan_id": 1}).to_list(),
            self._violations.find({"$or": [{"reported_at": {"$gte": since}},
                                           {"resolved_at": {"$gte": since}}]},
                                  {"plan_id": 1}).to_list())
        return sorted({str(d["plan_id"]) for docs in found for d in docs if d.get("plan_id")})
