"""Reconciling plans with the invariants in force: one invariant_enforced decision per
effective invariant, published for each new plan root (the reconciler) or for plans that
lack them (the back-fill). The decisions go through the recorder like any agent's; their
IDs and content are derived from root and invariant, so doing this twice records nothing
new."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.subjects import recorded
from contracts.decisions.types import DecisionType
from contracts.invariants.precedence import effective_invariants
from contracts.invariants.reconciliation import enforced_decisions, wire_body
from contracts.recording.events import DecisionPersisted
from contracts.shared.outgoing import OutgoingEvent
from services.ports.invariants import InvariantRecords
from services.ports.publishing import EventPublisher
from services.ports.records import DecisionRecords, PlanRecords

BACKFILL_PAGE = 200
"""Roots read per page by `backfill_all`."""


@dataclass(frozen=True)
class Backfilled:
    """What a back-fill did for one plan: the decisions it published, or why none."""

    plan_id: str
    published: list[Decision] = field(default_factory=list)
    skipped: str | None = None


class Reconciler:
    def __init__(self, publisher: EventPublisher, *, invariants: InvariantRecords,
                 decisions: DecisionRecords, plans: PlanRecords) -> None:
        self._publisher = publisher
        self._invariants = invariants
        self._decisions = decisions
        self._plans = plans

    async def reconcile(self, persisted: Sequence[DecisionPersisted]) -> list[Decision]:
        """For each new plan root among `persisted`, publish one invariant_enforced decision
        per effective invariant to decisions.recorded.<plan_id> (Nats-Msg-Id: its
        decision_id), and wait for JetStream to store them. The recorder records them like
        any agent's; their IDs and content are derived from root and invariant, so doing
        this twice for a root records nothing new."""
        root_ids = [e.decision_id for e in persisted
                    if e.decision_type is DecisionType.PROMPT_DEFINITION]
        if not root_ids:
            return []
        roots = [r for r in (await self._decisions.get_many(root_ids)).values()
                 if r.is_root and not r.is_correction]
        out = await self._enforced(roots)
        await self._publisher.publish_all([
            OutgoingEvent(recorded(d.plan_id), wire_body(d), d.decision_id) for d in out])
        return out

    async def _enforced(self, roots: Sequence[Decision]) -> list[Decision]:
        """The invariant_enforced decisions of these roots' plans, from the invariants in
        force now: their own, and the PLAN ones of their ancestor plans (one read of the
        parent links, one of the candidate invariants)."""
        if not roots:
            return []
        ancestors = await self._plans.ancestors(r.plan_id for r in roots)
        lineage = [p for r in roots for p in (r.plan_id, *ancestors.get(r.plan_id, ()))]
        inputs = await self._invariants.inputs_for(
            lineage, [r.project for r in roots if r.project],
            [r.action_template for r in roots if r.action_template])
        out: list[Decision] = []
        for root in roots:
            out += enforced_decisions(root, effective_invariants(
                root.plan_id, root.project, root.action_template, inputs,
                ancestors.get(root.plan_id, ())))
        return out

    async def backfill(self, plan_ids: Sequence[str]) -> list[Backfilled]:
        """Publish the invariant_enforced decisions these plans lack (one per plan, in the
        order given), through the recorder like the reconciler's. Idempotent: the IDs are
        derived from root and invariant, and only those not stored are published."""
        wanted = list(dict.fromkeys(p.upper() for p in plan_ids))
        roots = await self._decisions.roots_of(wanted)
        done = {b.plan_id: b for b in await self._backfill(list(roots.values()))}
        return [done.get(p) or Backfilled(p, [], "no root prompt_definition recorded")
                for p in wanted]

    async def backfill_all(self, page_size: int = BACKFILL_PAGE
                           ) -> AsyncIterator[list[Backfilled]]:
        """`backfill` over every plan with a root, a page of roots at a time (in decision
        ID order, so a plan started during the run is either in a page or reconciled by
        the reconciler)."""
        after: str | None = None
        while True:
            roots = await self._decisions.roots_page(after, page_size)
            if not roots:
                return
            yield await self._backfill(roots)
            after = roots[-1].decision_id

    async def _backfill(self, roots: Sequence[Decision]) -> list[Backfilled]:
        live, out = await self._live(roots)
        enforced = await self._enforced(live)
        stored = await self._decisions.get_many(d.decision_id for d in enforced)
        missing = [d for d in enforced if d.decision_id not in stored]
        await self._publisher.publish_all([
            OutgoingEvent(recorded(d.plan_id), wire_body(d), d.decision_id) for d in missing])
        for r in live:
            out[r.plan_id] = Backfilled(r.plan_id, [d for d in missing
                                                    if d.plan_id == r.plan_id])
        return [out[r.plan_id] for r in roots]

    async def _live(self, roots: Sequence[Decision]
                    ) -> tuple[list[Decision], dict[str, Backfilled]]:
        """The roots whose plans still run, and why each of the others is skipped."""
        statuses = await self._plans.statuses(r.plan_id for r in roots)
        live: list[Decision] = []
        skipped: dict[str, Backfilled] = {}
        for r in roots:
            if r.superseded_by is not None:
                skipped[r.plan_id] = Backfilled(r.plan_id, [], f"its root is superseded by "
                                                f"{r.superseded_by}")
            elif statuses.get(r.plan_id) is PlanStatus.ROLLED_BACK:
                skipped[r.plan_id] = Backfilled(r.plan_id, [], "the plan is rolled back")
            else:
                live.append(r)
        return live, skipped
