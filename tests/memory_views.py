"""The in-memory store's side of the read port (services/read_ports.py): the tree views
and the status counts, computed from what the memory store holds.

They answer as store/views.py and store/status.py do (the read contract in
tests/contract/ runs the same tests on both): pages never larger than `MAX_PAGE`,
decisions of a page without their raw reasoning (MongoDB's views leave it out), counts
for every plan asked about.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from contracts.corrections.record import Correction
from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus
from contracts.decisions.comments import COMMENTS_SHOWN, Comment
from contracts.decisions.model import Decision
from contracts.decisions.search import Found, search_tokens
from contracts.decisions.types import DecisionType
from contracts.shared.counts import FAILED_RECENTLY, LedgerStatus, PlanCounts
from contracts.shared.views import IdKind, IdMatch, RootFilter

if TYPE_CHECKING:  # tests/memory_store.py builds these views over its Database
    from tests.memory_store import Database, State

MAX_PAGE = 500
"""As store/views.py: the largest page any view returns."""


def _brief(d: Decision) -> Decision:
    return d.model_copy(update={"actor_reasoning": None})


def _kept(d: Decision, where: RootFilter | None) -> bool:
    """As store/lookups.py's root_query (a Decision here names no agent)."""
    if where is None:
        return True
    text = (where.text or "").lower()
    return ((where.project is None or d.project == where.project) and where.agent is None
            and (where.since is None or d.created_at >= where.since)
            and (where.until is None or d.created_at < where.until)
            and (not text or text in d.question.lower() or text in d.chosen_option.lower()))


def _is_plan_root(d: Decision) -> bool:
    return d.decision_type is DecisionType.PROMPT_DEFINITION and not d.is_correction


class MemoryViews:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def recent_roots(self, limit: int, before: str | None = None,
                           where: RootFilter | None = None) -> list[Decision]:
        roots = sorted((d for d in self._db.state.decisions.values()
                        if _is_plan_root(d) and (before is None or d.decision_id < before)
                        and _kept(d, where)),
                       key=lambda d: d.decision_id, reverse=True)
        return [_brief(d) for d in roots[:min(limit, MAX_PAGE)]]

    async def search(self, lead: list[str], limit: int,
                     before: str | None = None) -> list[Found]:
        """As store/lookups.py: the tokens made as the recorder makes them (a decision
        here is recorded unsigned)."""
        found = []
        for d in sorted(self._db.state.decisions.values(), key=lambda d: d.decision_id,
                        reverse=True):
            tokens = frozenset(search_tokens(d, None))
            if (before is None or d.decision_id < before) \
                    and (not lead or not tokens.isdisjoint(lead)):
                found.append(Found(_brief(d), None, tokens))
                if len(found) == min(limit, MAX_PAGE):
                    break
        return found

    async def recent_corrections(self, plan_id: str | None = None,
                                 status: CorrectionStatus | None = None, limit: int = 100,
                                 before: str | None = None) -> list[Correction]:
        found = sorted((v.correction for v in self._db.state.corrections.values()
                        if (plan_id is None or v.correction.plan_id == plan_id)
                        and (status is None or v.correction.status is status)
                        and (before is None or v.correction.correction_id < before)),
                       key=lambda c: c.correction_id, reverse=True)
        return found[:min(limit, MAX_PAGE)]

    async def comments(self, decision_id: str) -> list[Comment]:
        found = sorted((c for c in self._db.state.comments.values()
                        if c.decision_id == decision_id), key=lambda c: c.comment_id)
        return found[-COMMENTS_SHOWN:]

    async def plan_comments(self, plan_id: str, limit: int = 10_000) -> list[Comment]:
        return sorted((c for c in self._db.state.comments.values() if c.plan_id == plan_id),
                      key=lambda c: c.comment_id)[:limit]

    async def ids_ending(self, suffix: str, limit: int = 10,
                         kinds: Collection[IdKind] | None = None) -> list[IdMatch]:
        st = self._db.state
        wanted = set(IdKind) if kinds is None else set(kinds)
        every: dict[IdKind, list[tuple[str, str | None]]] = {
            IdKind.CORRECTION: [(v.correction.correction_id, v.correction.plan_id)
                                for v in st.corrections.values()],
            IdKind.INVARIANT: [(i, None) for i in st.invariants],
            IdKind.VIOLATION: [(i, v.plan_id) for i, v in st.violations.items()],
            IdKind.PLAN: [(p, p) for p in st.plans],
            IdKind.DECISION: [(d.decision_id, d.plan_id) for d in st.decisions.values()]}
        return [IdMatch(kind, i, plan) for kind, ids in every.items() if kind in wanted
                for i, plan in [x for x in ids if x[0].endswith(suffix)][:limit]]

    async def level(self, plan_id: str, parent: str | None, *, after: int | None,
                    limit: int, superseded: bool) -> list[Decision]:
        if parent is None:
            return self._roots(plan_id, superseded)
        found = sorted((d for d in self._db.state.decisions.values()
                        if d.parent_decision_id == parent and d.plan_id == plan_id
                        and (superseded or d.superseded_by is None)
                        and (after is None or (d.sequence_number or 0) > after)),
                       key=lambda d: d.sequence_number or 0)
        return [_brief(d) for d in found[:min(limit, MAX_PAGE)]]

    def _roots(self, plan_id: str, superseded: bool) -> list[Decision]:
        """The root, then its replacements by `superseded_by`, as store/views.py."""
        held = self._db.state.decisions
        d = next((x for x in held.values() if x.plan_id == plan_id and _is_plan_root(x)), None)
        chain: list[Decision] = []
        seen: set[str] = set()
        while d is not None and d.decision_id not in seen and len(chain) < MAX_PAGE:
            seen.add(d.decision_id)
            if d.parent_decision_id is None and d.plan_id == plan_id:
                chain.append(_brief(d))
            if d.superseded_by is None:
                break
            d = held.get(d.superseded_by)
        return chain if superseded else [x for x in chain if x.superseded_by is None]

    async def child_counts(self, parents: Iterable[str], *, superseded: bool
                           ) -> dict[str, int]:
        wanted = set(parents)
        return dict(Counter(d.parent_decision_id for d in self._db.state.decisions.values()
                            if d.parent_decision_id in wanted
                            and (superseded or d.superseded_by is None)))

    async def counts(self, plan_ids: Iterable[str]) -> dict[str, PlanCounts]:
        st = self._db.state
        return {p: _plan_counts(st, p) for p in dict.fromkeys(plan_ids)}

    async def plan_exists(self, plan_id: str) -> bool:
        st = self._db.state
        return plan_id in st.plans or any(d.plan_id == plan_id for d in st.decisions.values())


def _plan_counts(st: State, plan_id: str) -> PlanCounts:
    doc = st.plans.get(plan_id) or {}
    counter = doc.get("next_sequence")
    decisions = counter if isinstance(counter, int) else sum(
        d.plan_id == plan_id for d in st.decisions.values())
    mine = [v.correction for v in st.corrections.values() if v.correction.plan_id == plan_id]
    superseded = sum(d.plan_id == plan_id and d.superseded_by is not None
                     for d in st.decisions.values())
    return PlanCounts(
        decisions=decisions, current=max(0, decisions - superseded),
        open_corrections=sum(not CORRECTION_LIFECYCLE.is_terminal(c.status) for c in mine),
        open_violations=sum(v.plan_id == plan_id and v.resolved_at is None
                            for v in st.violations.values()))


def memory_status(st: State, now: datetime) -> LedgerStatus:
    """As store/status.py; the memory store has no workers' heartbeats."""
    by_rule = Counter((d.errors[0].rule.value if d.errors else "unknown")
                      for d in st.dead_letters.values() if d.discarded_at is None)
    flying = [v.correction for v in st.corrections.values()
              if not CORRECTION_LIFECYCLE.is_terminal(v.correction.status)]
    failed = [v.correction.last.at for v in st.corrections.values()
              if v.correction.status is CorrectionStatus.FAILED]
    return LedgerStatus(
        dead_letters=sum(by_rule.values()), dead_letters_by_rule=dict(by_rule),
        corrections_in_flight=dict(Counter(c.status.value for c in flying)),
        oldest_in_flight_at=min((c.requested_at for c in flying), default=None),
        violations_open=dict(Counter(v.severity.value for v in st.violations.values()
                                     if v.resolved_at is None)),
        workers=[], corrections_failed=len(failed),
        failed_recently=sum(1 for t in failed if t >= now - FAILED_RECENTLY),
        last_failed_at=max(failed, default=None))
