"""An in-memory store: every port of services/ports.py and services/read_ports.py, for
service and front-end tests without servers.

It keeps the rules the MongoDB store keeps inside its transactions, and raises the same
named errors (contracts.shared.persistence): a conditional write that finds the record
changed raises ConcurrentChange, a lost plan lease LeaseLost, a taken unique key
DuplicateRecord, an attempt naming what does not exist ForeignKeyViolation. A
transaction works on a copy of the state and swaps it in only when the whole step
succeeded, so a failed step leaves nothing behind, as an aborted MongoDB transaction
does. Nothing in a transaction awaits, so no other task ever sees half of one.

The contract suite (tests/contract/) runs the same tests against this store and the
real one: a rule this store forgets, or keeps differently, fails there.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from contracts.corrections.append import AppendWrites
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import Changes, Versioned, Written
from contracts.corrections.record import Correction
from contracts.corrections.revert import RevertWrites
from contracts.corrections.states import (
    ATTEMPT_LIFECYCLE,
    CORRECTION_LIFECYCLE,
    CorrectionAttemptState,
    CorrectionStatus,
)
from contracts.decisions.comments import Comment
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PLAN_LIFECYCLE, PlanStatus
from contracts.decisions.plans import PlanRecord, ancestry
from contracts.decisions.types import DecisionType
from contracts.impact.summary import CorrectionImpact, summarize
from contracts.impact.views import DecisionView, PlanLink, child_order
from contracts.impact.walk import ImpactWalk
from contracts.invariants.approval_wire import VerdictOutcome
from contracts.invariants.approvals import Approval
from contracts.invariants.errors import (
    DuplicateInvariant,
    ViolationAlreadyResolved,
    ViolationConflict,
)
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.outcomes import GateEffects
from contracts.invariants.violations import BLOCKING_SEVERITIES, InvariantViolation
from contracts.recording.facts import PlanClaim, Resume, Stored, StoredFacts
from contracts.recording.message import Candidate
from contracts.shared.counts import LedgerStatus
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.outgoing import OutgoingEvent, Pending
from contracts.shared.persistence import (
    ConcurrentChange,
    DuplicateRecord,
    ForeignKeyViolation,
    InvariantNotFound,
    LeaseFence,
    LeaseLost,
    ResourceNotFoundError,
    ViolationNotFound,
)
from contracts.shared.timestamps import utc_now
from contracts.trust.ownership import Ownership
from contracts.trust.policy import principal_name, provenance
from contracts.trust.signing import Signature
from services.ports.corrections import CorrectionStorePort
from services.ports.invariants import EventFor, InvariantStorePort
from services.ports.records import DeadLetterRecords, DeadLetterShelf, RecordedDecisions
from services.read_ports import LedgerReads
from tests.memory_approvals import MemoryApprovals
from tests.memory_upkeep import MemoryUpkeep
from tests.memory_views import MemoryViews, memory_status

T = TypeVar("T")

ORDER_STRIDE = 1000
"""As store.outbox: events of one transaction are ordered version * ORDER_STRIDE + index."""
UNFINISHED = frozenset(s for s in CorrectionStatus if not CORRECTION_LIFECYCLE.is_terminal(s))
RECORD_FIELDS = frozenset(PlanRecord.model_fields) - {"plan_id"}


@dataclasses.dataclass
class State:
    """What the database holds. Values are immutable models, except plan documents
    (dicts, like MongoDB's: a counter, an epoch and a PlanRecord's fields), which a
    transaction copies before it changes one."""

    decisions: dict[str, Decision] = dataclasses.field(default_factory=dict)
    plans: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    corrections: dict[str, Versioned] = dataclasses.field(default_factory=dict)
    attempts: dict[str, CorrectionAttemptRecord] = dataclasses.field(default_factory=dict)
    outbox: dict[str, tuple[Pending, datetime]] = dataclasses.field(default_factory=dict)
    leases: dict[str, tuple[str, datetime]] = dataclasses.field(default_factory=dict)
    fences: dict[str, str] = dataclasses.field(default_factory=dict)
    """Lease -> its last taker, for leases taken fenced (collection `lease_fences`)."""
    dead_letters: dict[str, DeadLetter] = dataclasses.field(default_factory=dict)
    invariants: dict[str, Invariant] = dataclasses.field(default_factory=dict)
    violations: dict[str, InvariantViolation] = dataclasses.field(default_factory=dict)
    comments: dict[str, Comment] = dataclasses.field(default_factory=dict)
    recorded: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    """decision_id -> (content hash, stream sequence that wrote it): what the recorder
    stores beside a decision to know a redelivery from a duplicate."""
    provenance: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)
    """decision_id -> who recorded it, as verified (recorded_by, verified, signature)."""
    approvals: dict[str, Approval] = dataclasses.field(default_factory=dict)
    approval_verdicts: dict[str, VerdictOutcome] = dataclasses.field(default_factory=dict)

    def copy(self) -> State:
        return State(**{f.name: dict(getattr(self, f.name))
                        for f in dataclasses.fields(self)})

    def plan_doc(self, plan_id: str) -> dict[str, Any] | None:
        """The plan's document, copied: change it, then put it back."""
        doc = self.plans.get(plan_id)
        return dict(doc) if doc is not None else None


class Database:
    """The shared state and its one way to change it atomically."""

    def __init__(self) -> None:
        self.state = State()

    def transaction(self, step: Callable[[State], T]) -> T:
        working = self.state.copy()
        result = step(working)
        self.state = working
        return result


# --- decisions and plans ---------------------------------------------------------------


def _insert_decision(st: State, d: Decision) -> None:
    """The unique indexes of the decisions collection: _id, (plan_id, sequence_number),
    and one non-correction root per plan."""
    if d.decision_id in st.decisions:
        raise DuplicateRecord(f"decision {d.decision_id} exists")
    for other in st.decisions.values():
        if other.plan_id != d.plan_id:
            continue
        if other.sequence_number == d.sequence_number:
            raise DuplicateRecord(f"plan {d.plan_id} has sequence {d.sequence_number}")
        if d.is_root and not d.is_correction and other.is_root and not other.is_correction:
            raise DuplicateRecord(f"plan {d.plan_id} has a root")
    st.decisions[d.decision_id] = d


def _reserve(st: State, plan_id: str, count: int, now: datetime, *,
             bump_epoch: bool = False) -> dict[str, Any] | None:
    """As store.sequences.reserve: the counter as it was (None: a new plan)."""
    before = st.plans.get(plan_id)
    doc: dict[str, Any] = dict(before) if before else {"created_at": now,
                                                       "status": PlanStatus.ACTIVE.value}
    doc["next_sequence"] = int(doc.get("next_sequence", 0)) + count
    if bump_epoch:
        doc["epoch"] = int(doc.get("epoch", 0)) + 1
    st.plans[plan_id] = doc
    return before


def _record(plan_id: str, doc: Mapping[str, Any]) -> PlanRecord:
    return PlanRecord.model_validate(
        {**{k: v for k, v in doc.items() if k in RECORD_FIELDS}, "plan_id": plan_id})


class MemoryDecisions:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, decision_id: str) -> Decision | None:
        return self._db.state.decisions.get(decision_id)

    async def recorded_by(self, decision_id: str) -> str | None:
        by = self._db.state.provenance.get(decision_id, {}).get("recorded_by")
        return by if isinstance(by, str) else None

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]:
        held = self._db.state.decisions
        return {i: held[i] for i in decision_ids if i in held}

    def lay_out(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        return list(candidates)  # nothing to lay out: records are kept as models

    async def roots_of(self, plan_ids: Iterable[str]) -> dict[str, Decision]:
        wanted = set(plan_ids)
        return {d.plan_id: d for d in self._db.state.decisions.values()
                if d.plan_id in wanted and d.is_root and not d.is_correction}

    async def roots_page(self, after: str | None, limit: int) -> list[Decision]:
        roots = sorted((d for d in self._db.state.decisions.values()
                        if d.decision_type is DecisionType.PROMPT_DEFINITION
                        and not d.is_correction), key=lambda d: d.decision_id)
        return [d for d in roots if after is None or d.decision_id > after][:limit]

    async def in_sequence(self, plan_id: str) -> list[Decision]:
        return sorted((d for d in self._db.state.decisions.values() if d.plan_id == plan_id),
                      key=lambda d: d.sequence_number or 0)

    async def current_tree(self, plan_id: str, limit: int = 10_000) -> list[Decision]:
        return [d for d in await self.in_sequence(plan_id) if d.superseded_by is None][:limit]

    async def full_tree(self, plan_id: str, limit: int = 10_000) -> list[Decision]:
        return (await self.in_sequence(plan_id))[:limit]

    async def up_to(self, plan_id: str, sequence: int | None, limit: int = 10_000
                    ) -> list[Decision]:
        return [d for d in await self.in_sequence(plan_id)
                if sequence is None or (d.sequence_number or 0) <= sequence][:limit]

    async def children(self, decision_id: str, *, current_only: bool = True,
                       limit: int = 1000) -> list[Decision]:
        return sorted((d for d in self._db.state.decisions.values()
                       if d.parent_decision_id == decision_id
                       and not (current_only and d.superseded_by is not None)),
                      key=lambda d: d.sequence_number or 0)[:limit]

    async def count_children(self, decision_id: str, *, current_only: bool = True) -> int:
        return len(await self.children(decision_id, current_only=current_only,
                                       limit=10**9))

    # --- the recorder's batch ------------------------------------------------------

    async def facts_for(self, candidates: Sequence[Candidate], *,
                        existing: bool = True) -> StoredFacts:
        st = self._db.state
        ids = {c.decision.decision_id for c in candidates}
        plans = {c.decision.plan_id for c in candidates}
        claimed = {p for c in candidates for p in c.decision.downstream_plan_ids}
        parents = {p for c in candidates
                   if (p := c.decision.parent_decision_id) is not None and p not in ids}
        named_parents = {p for c in candidates
                         if c.decision.is_root and (p := c.decision.parent_plan_id)}
        docs = {p: st.plans[p] for p in plans | claimed | named_parents if p in st.plans}
        parent_of = {p: doc.get("parent_plan_id") for p, doc in st.plans.items()}
        lineage = {p: chain for p in plans if (chain := ancestry(p, parent_of))}
        considered = plans | {a for chain in lineage.values() for a in chain}
        blocked = _blocking(st, considered)
        stored = {i: Stored(*st.recorded.get(i, ("", -1))) for i in (ids if existing else ())
                  if i in st.decisions}
        superseded_by = {p: d.superseded_by for p in parents
                         if (d := st.decisions.get(p)) is not None and d.superseded_by}
        rolled = {p: doc.get("rolled_back_by") for p, doc in docs.items()
                  if p in plans and doc.get("status") == PlanStatus.ROLLED_BACK.value}
        by_new = {a.new_decision_id: a for a in st.attempts.values() if a.new_decision_id}
        by_correction = {a.correction_id: a for a in st.attempts.values()
                         if a.new_decision_id}
        superseded = {}
        for parent, new in superseded_by.items():
            a = by_new.get(new)
            superseded[parent] = Resume(correction_id=a.correction_id if a else None,
                                        replacement_decision_id=new,
                                        plan_id=a.plan_id if a else None)
        rolled_back = {}
        for plan_id, correction in rolled.items():
            a = by_correction.get(correction) if correction else None
            rolled_back[plan_id] = Resume(correction_id=correction,
                                          replacement_decision_id=a.new_decision_id
                                          if a else None, plan_id=a.plan_id if a else None)
        named = {x for c in candidates for x in c.decision.downstream_decision_ids} - ids
        claiming = {c.decision.plan_id for c in candidates if c.decision.downstream_plan_ids}
        rooted = {c.decision.plan_id for c in candidates if c.decision.is_root}
        return StoredFacts(
            existing=stored,
            plan_of={p: st.decisions[p].plan_id for p in parents if p in st.decisions},
            # Only for the plans a root of the batch would join, as the real store.
            root_of_plan={d.plan_id: d.decision_id for d in st.decisions.values()
                          if d.plan_id in rooted and d.is_root and not d.is_correction},
            blocked_plans=blocked, blocking_ancestors=lineage,
            superseded=superseded, rolled_back=rolled_back,
            epochs={p: int(doc.get("epoch", 0)) for p, doc in docs.items() if p in plans},
            claims={p: _claim(doc) for p, doc in docs.items()},
            plan_ancestors={p: frozenset(ancestry(p, parent_of)) for p in claiming},
            dependent_plan={x: st.decisions[x].plan_id for x in named if x in st.decisions},
            ownership={p: Ownership(doc["owner"], tuple(doc.get("delegates") or ()))
                       for p, doc in docs.items() if doc.get("owner")},
            created_at={p: st.decisions[p].created_at for p in parents
                        if p in st.decisions})

    async def insert_recorded(self, accepted: Sequence[Candidate], now: datetime,
                              epochs: Mapping[str, int] | None = None,
                              ownership: Mapping[str, Ownership] | None = None,
                              effects: GateEffects | None = None, *,
                              fence: LeaseFence | None = None) -> list[Decision] | None:
        if effects:
            raise NotImplementedError("the invariants' gate records its effects in MongoDB "
                                      "(store.gate_sink); the in-memory store has no sink")
        if not accepted:
            return []

        def write(st: State) -> list[Decision]:
            if fence is not None:
                _fence(st, fence)
            return self._insert(st, accepted, now, epochs, ownership)

        try:
            written = self._db.transaction(write)
        except (DuplicateRecord, _Stale):
            return None
        return written

    def _insert(self, st: State, accepted: Sequence[Candidate], now: datetime,
                epochs: Mapping[str, int] | None,
                ownership: Mapping[str, Ownership] | None) -> list[Decision]:
        per_plan: dict[str, list[Candidate]] = defaultdict(list)
        for c in accepted:
            per_plan[c.decision.plan_id].append(c)
        out: list[Decision] = []
        for plan_id, group in per_plan.items():
            before = _reserve(st, plan_id, len(group), now)
            if epochs is not None and before is not None and (
                    int(before.get("epoch", 0)) != epochs.get(plan_id, 0)
                    or before.get("status") == PlanStatus.ROLLED_BACK.value):
                raise _Stale(plan_id)
            rooted = any(c.decision.is_root for c in group)
            if ownership is not None and before is not None and not rooted and \
                    before.get("owner") != ownership.get(plan_id, Ownership()).owner:
                raise _Stale(plan_id)
            start = int(before.get("next_sequence", 0)) if before else 0
            for i, c in enumerate(group):
                d = c.decision.model_copy(update={"sequence_number": start + i})
                _insert_decision(st, d)
                st.recorded[d.decision_id] = (c.content_hash, c.stream_sequence)
                st.provenance[d.decision_id] = provenance(c.identity, "recorded_by")
                out.append(d)
        owners = dict(ownership or {})
        for c in accepted:
            if c.decision.is_root and (name := principal_name(c.identity)):
                owners[c.decision.plan_id] = Ownership(name, tuple(c.decision.delegates))
        by_id = {c.decision.decision_id: c for c in accepted}
        for d in out:
            if d.is_root:
                _record_root(st, d, principal_name(by_id[d.decision_id].identity))
            for p in d.downstream_plan_ids:
                _record_claim(st, d, p, now, owners.get(d.plan_id, Ownership()))
        return out


class _Stale(Exception):
    """A correction changed a plan after the batch's facts were read (StaleFacts)."""


def _claim(doc: Mapping[str, Any]) -> PlanClaim:
    owners = doc.get("claim_owners")
    return PlanClaim(doc.get("parent_plan_id"), doc.get("spawned_from_decision_id"),
                     doc.get("spawned_at"), doc.get("named_parent_plan_id"),
                     doc.get("root_created_at"), tuple(owners) if owners else None)


def _record_root(st: State, d: Decision, owner: str | None) -> None:
    doc = st.plan_doc(d.plan_id) or {}
    spawned_at, parent = doc.get("spawned_at"), doc.get("parent_plan_id")
    claim_owners = doc.get("claim_owners")
    if (spawned_at is not None and spawned_at > d.created_at) or (
            d.parent_plan_id is not None and parent not in (None, d.parent_plan_id)) or (
            claim_owners is not None and owner not in claim_owners):
        raise _Stale(d.plan_id)
    doc.update(owner=owner, delegates=list(d.delegates) if owner else [])
    doc.update(root_decision_id=d.decision_id, project=d.project,
               action_template=d.action_template, root_created_at=d.created_at,
               named_parent_plan_id=d.parent_plan_id)
    st.plans[d.plan_id] = doc


def _record_claim(st: State, d: Decision, plan_id: str, now: datetime,
                  claimer: Ownership) -> None:
    doc = st.plan_doc(plan_id)
    if doc is None:
        doc = {"created_at": now, "status": PlanStatus.ACTIVE.value, "next_sequence": 0}
    ok = (doc.get("parent_plan_id") is None
          or (doc.get("parent_plan_id") == d.plan_id
              and doc.get("spawned_from_decision_id") == d.decision_id)) \
        and doc.get("named_parent_plan_id") in (None, d.plan_id) \
        and (doc.get("root_created_at") is None or (
            doc["root_created_at"] >= d.created_at
            and (claimer.owner is None or doc.get("owner") in claimer.principals)))
    if not ok:
        raise DuplicateRecord(f"plan {plan_id} is claimed otherwise")
    doc.update(parent_plan_id=d.plan_id, spawned_from_decision_id=d.decision_id,
               spawned_at=d.created_at,
               claim_owners=list(claimer.principals) if claimer.owner else None)
    st.plans[plan_id] = doc


def _blocking(st: State, plan_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    wanted = set(plan_ids)
    found: dict[str, list[InvariantViolation]] = defaultdict(list)
    for v in st.violations.values():
        if v.plan_id in wanted and v.resolved_at is None and v.severity in BLOCKING_SEVERITIES:
            found[v.plan_id].append(v)
    return {p: tuple(v.violation_id for v in sorted(vs, key=lambda v: (v.reported_at,
                                                                        v.violation_id)))
            for p, vs in found.items()}


class MemoryPlans:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, plan_id: str) -> PlanRecord | None:
        doc = self._db.state.plans.get(plan_id)
        return _record(plan_id, doc) if doc is not None else None

    async def owner(self, plan_id: str) -> str | None:
        owner = self._db.state.plans.get(plan_id, {}).get("owner")
        return owner if isinstance(owner, str) else None

    async def ancestors(self, plan_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        parent_of = {p: doc.get("parent_plan_id") for p, doc in self._db.state.plans.items()}
        return {p: chain for p in plan_ids if (chain := ancestry(p, parent_of))}

    async def statuses(self, plan_ids: Iterable[str]) -> dict[str, PlanStatus]:
        plans = self._db.state.plans
        return {p: PlanStatus(plans[p].get("status", PlanStatus.ACTIVE.value))
                for p in plan_ids if p in plans}

    async def children(self, plan_id: str) -> list[PlanRecord]:
        return [_record(p, doc) for p, doc in self._db.state.plans.items()
                if doc.get("parent_plan_id") == plan_id]


class MemoryImpact:
    """The same level-by-level walk as store.impact.ImpactReader, over the state."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def walk(self, target_decision_id: str, limit: int | None = None) -> ImpactWalk:
        st = self._db.state
        children: dict[str | None, list[Decision]] = defaultdict(list)
        roots: dict[str, list[Decision]] = defaultdict(list)
        for d in st.decisions.values():
            if d.superseded_by is None:
                children[d.parent_decision_id].append(d)
                if d.parent_decision_id is None:
                    roots[d.plan_id].append(d)
        walk = ImpactWalk(target_decision_id, limit)
        while not walk.done:
            found = {i: st.decisions[i] for i in walk.decision_ids_wanted
                     if i in st.decisions}
            views = {i: DecisionView.from_decision(d, child_order(children.get(i, [])))
                     for i, d in found.items()}
            plan_roots = {p: child_order(roots.get(p, [])) for p in walk.plan_ids_wanted}
            links = {p: PlanLink((st.plans.get(p) or {}).get("parent_plan_id"),
                                 min((r.created_at for r in roots.get(p, [])), default=None))
                     for p in walk.plan_ids_wanted}
            walk.expand(views, plan_roots, links)
        return walk

    async def impact(self, target_decision_id: str, limit: int | None = None
                     ) -> CorrectionImpact:
        return summarize(await self.walk(target_decision_id, limit))

    async def sequence_mark(self, plan_id: str) -> int:
        return int(self._db.state.plans.get(plan_id, {}).get("next_sequence", 0))


# --- corrections -----------------------------------------------------------------------


class MemoryCorrections:
    def __init__(self, db: Database) -> None:
        self._db = db

    def _ordered(self) -> list[Versioned]:
        return sorted(self._db.state.corrections.values(),
                      key=lambda v: (v.arrival, v.correction.correction_id))

    async def get(self, correction_id: str) -> Versioned | None:
        return self._db.state.corrections.get(correction_id)

    async def find(self, plan_id: str | None = None, status: CorrectionStatus | None = None,
                   limit: int = 100) -> list[Correction]:
        return [v.correction for v in self._ordered()
                if (plan_id is None or v.correction.plan_id == plan_id)
                and (status is None or v.correction.status is status)][:limit]

    async def touching(self, decision_id: str, limit: int = 100) -> list[Correction]:
        return [v.correction for v in self._ordered()
                if decision_id in (v.correction.decision_id,
                                   v.correction.new_decision_id)][:limit]

    async def plans_with_unfinished(self, after: str | None = None, limit: int = 1000
                                    ) -> tuple[list[str], str | None]:
        found = sorted({v.correction.plan_id for v in self._db.state.corrections.values()
                        if v.correction.status in UNFINISHED
                        and (after is None or v.correction.plan_id > after)})
        page = found[:limit]
        return page, (page[-1] if len(found) > limit else None)

    async def unfinished(self, plan_id: str) -> list[Versioned]:
        return [v for v in self._ordered() if v.correction.plan_id == plan_id
                and v.correction.status in UNFINISHED]

    async def heads(self, plan_id: str) -> list[Versioned]:
        first: dict[object, Versioned] = {}
        for v in await self.unfinished(plan_id):
            first.setdefault(v.correction.status, v)
        return sorted(first.values(), key=lambda v: (v.arrival, v.correction.correction_id))


def _create_attempt(st: State, record: CorrectionAttemptRecord) -> None:
    """The foreign keys MongoDB lacks and store.attempts checks by hand."""
    if record.correction_id not in st.corrections:
        raise ForeignKeyViolation("correction attempt", "correction_id", record.correction_id)
    for field, ref in (("original_decision_id", record.original_decision_id),
                       ("new_decision_id", record.new_decision_id)):
        if ref is not None and ref not in st.decisions:
            raise ForeignKeyViolation("correction attempt", field, ref)
    if record.id in st.attempts:
        raise DuplicateRecord(f"attempt {record.id} exists")
    st.attempts[record.id] = record


def _replace_attempt(st: State, expected: CorrectionAttemptState,
                     after: CorrectionAttemptRecord) -> None:
    ATTEMPT_LIFECYCLE.check(expected, after.state)
    held = st.attempts.get(after.id)
    if held is None or held.state is not expected:
        raise ConcurrentChange(f"attempt {after.id} is no longer {expected.value}")
    st.attempts[after.id] = after


class MemoryAttempts:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, record: CorrectionAttemptRecord) -> CorrectionAttemptRecord:
        self._db.transaction(lambda st: _create_attempt(st, record))
        return record

    async def get(self, attempt_id: str) -> CorrectionAttemptRecord:
        found = self._db.state.attempts.get(attempt_id)
        if found is None:
            raise ResourceNotFoundError("correction attempt", attempt_id)
        return found

    async def list_by_correction(self, correction_id: str) -> list[CorrectionAttemptRecord]:
        return sorted((a for a in self._db.state.attempts.values()
                       if a.correction_id == correction_id), key=lambda a: (a.created_at, a.id))

    async def list_by_plan(self, plan_id: str) -> list[CorrectionAttemptRecord]:
        return sorted((a for a in self._db.state.attempts.values() if a.plan_id == plan_id),
                      key=lambda a: (a.created_at, a.id))

    async def replace(self, expected: CorrectionAttemptState,
                      after: CorrectionAttemptRecord) -> None:
        self._db.transaction(lambda st: _replace_attempt(st, expected, after))


class MemoryLeases:
    """Leases: the rules of store.leases.Leases, on this process's clock (the store's own
    clock, as the database server's is the MongoDB store's)."""

    def __init__(self, db: Database, ttl_seconds: float) -> None:
        self._db = db
        self.ttl = timedelta(seconds=ttl_seconds)

    async def acquire(self, plan_id: str, owner: str, *, fenced: bool = False) -> bool:
        now = utc_now()
        held = self._db.state.leases.get(plan_id)
        if held is not None and held[0] != owner and not held[1] < now:
            return False
        self._db.state.leases[plan_id] = (owner, now + self.ttl)
        if fenced:
            self._db.state.fences[plan_id] = owner
        return True

    async def renew(self, plan_id: str, owner: str) -> bool:
        held = self._db.state.leases.get(plan_id)
        if held is None or held[0] != owner:
            return False
        self._db.state.leases[plan_id] = (owner, utc_now() + self.ttl)
        return True

    async def release(self, plan_id: str, owner: str) -> None:
        held = self._db.state.leases.get(plan_id)
        if held is not None and held[0] == owner:
            del self._db.state.leases[plan_id]

    async def live(self, plan_ids: list[str]) -> set[str]:
        leases, now = self._db.state.leases, utc_now()
        return {p for p in plan_ids if p in leases and leases[p][1] >= now}

    async def holder(self, plan_id: str) -> str | None:
        held = self._db.state.leases.get(plan_id)
        return held[0] if held else None

    def fence(self, st: State, plan_id: str, owner: str) -> None:
        held = st.leases.get(plan_id)
        if held is None or held[0] != owner:
            raise LeaseLost(plan_id, owner)
        st.leases[plan_id] = (owner, utc_now() + self.ttl)


def _fence(st: State, f: LeaseFence) -> None:
    """store.leases.fence_lease: LeaseLost once another took the lease since."""
    if st.fences.get(f.lease) != f.owner:
        raise LeaseLost(f.lease, f.owner)


def _add_events(st: State, key: str, version: int, events: Sequence[OutgoingEvent],
                now: datetime) -> None:
    for i, e in enumerate(events):
        if e.msg_id in st.outbox:
            raise DuplicateRecord(f"outbox holds {e.msg_id}")
        st.outbox[e.msg_id] = (Pending(key, version * ORDER_STRIDE + i, e), now)


class MemoryOutbox:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def pending_for(self, source_id: str) -> list[Pending]:
        return sorted((p for p, _ in self._db.state.outbox.values()
                       if p.source_id == source_id), key=lambda p: p.order)

    async def pending(self, created_before: datetime | None = None,
                      limit: int = 1000) -> list[Pending]:
        left = sorted((at, p.order, p) for p, at in self._db.state.outbox.values()
                      if created_before is None or at < created_before)
        return [p for _, _, p in left][:limit]

    async def delete(self, msg_ids: Sequence[str]) -> None:
        for m in msg_ids:
            self._db.state.outbox.pop(m, None)

    async def count(self) -> int:
        return len(self._db.state.outbox)


class MemoryWriter:
    """store.correction_writes.CorrectionWriter: one step, all or nothing."""

    def __init__(self, db: Database, leases: MemoryLeases) -> None:
        self._db = db
        self._leases = leases

    async def commit(self, changes: Changes, now: datetime) -> Written:
        return self._db.transaction(lambda st: self._write(st, changes, now))

    def _write(self, st: State, c: Changes, now: datetime) -> Written:
        plan_id = c.correction.plan_id
        if c.lease_owner is not None:
            self._leases.fence(st, plan_id, c.lease_owner)
        cid = c.correction.correction_id
        held = st.corrections.get(cid)
        if c.expected_version is None:
            if held is not None:
                raise DuplicateRecord(f"correction {cid} exists")
            version = 1
        else:
            if held is None or held.version != c.expected_version:
                raise ConcurrentChange(f"correction {cid} changed since version "
                                       f"{c.expected_version}")
            version = c.expected_version + 1
        arrival = c.arrival if c.expected_version is None else held.arrival if held else 0
        st.corrections[cid] = Versioned(c.correction, version, arrival)
        for a in c.attempts:
            if a.expected is None:
                _create_attempt(st, a.attempt)
            else:
                _replace_attempt(st, a.expected, a.attempt)
        new: list[Decision] = []
        if c.revert is not None:
            new = self._revert(st, c.revert, now)
        if c.append is not None:
            new = self._append(st, c.append, now)
        events = list(c.events)
        if c.announce is not None:
            events += [e for d in new for e in c.announce(d)]
        _add_events(st, cid, version, events, now)
        return Written(Versioned(c.correction, version, c.arrival), new)

    def _revert(self, st: State, writes: RevertWrites, now: datetime) -> list[Decision]:
        before = _reserve(st, writes.plan_id, 1, now, bump_epoch=True)
        seq = int(before.get("next_sequence", 0)) if before else 0
        new = writes.new_decision.model_copy(update={"sequence_number": seq})
        _insert_decision(st, new)
        for i in writes.supersede_ids:
            d = st.decisions.get(i)
            if d is None or d.superseded_by is not None:
                raise ConcurrentChange(f"decision {i} changed since the impact analysis")
            st.decisions[i] = d.model_copy(update={
                "superseded_by": new.decision_id, "superseded_at": new.created_at,
                "superseded_by_correction": writes.correction_id})
        self._roll_back(st, writes.child_plans_to_roll_back, writes.correction_id, now)
        if not writes.may_have_late_decisions(seq):
            return [new]
        gone = set(writes.supersede_ids)
        rolled = set(writes.child_plans_to_roll_back)
        for d in st.decisions.values():
            if d.superseded_by is None and (d.parent_decision_id in gone or d.plan_id in rolled):
                raise ConcurrentChange(f"decision {d.decision_id} was recorded under what "
                                       "the revert removes since the impact analysis")
        return [new]

    @staticmethod
    def _roll_back(st: State, plan_ids: Sequence[str], correction_id: str,
                   now: datetime) -> None:
        sources = {s.value for s in PLAN_LIFECYCLE.sources(PlanStatus.ROLLED_BACK)}
        for plan_id in plan_ids:
            doc = st.plan_doc(plan_id)
            if doc is None:
                st.plans[plan_id] = {"status": PlanStatus.ROLLED_BACK.value,
                                     "rolled_back_by": correction_id, "rolled_back_at": now,
                                     "epoch": 1, "created_at": now, "next_sequence": 0}
            elif doc.get("status") is None or doc["status"] in sources:
                doc.update(status=PlanStatus.ROLLED_BACK.value, rolled_back_by=correction_id,
                           rolled_back_at=now, epoch=int(doc.get("epoch", 0)) + 1)
                st.plans[plan_id] = doc

    @staticmethod
    def _append(st: State, writes: AppendWrites, now: datetime) -> list[Decision]:
        before = _reserve(st, writes.plan_id, 1, now)
        seq = int(before.get("next_sequence", 0)) if before else 0
        intervention = writes.intervention.model_copy(update={"sequence_number": seq})
        child = writes.child_plan
        if child.plan_id in st.plans:
            raise DuplicateRecord(f"plan {child.plan_id} exists")
        parent = st.plans.get(writes.plan_id, {})
        owned = {"owner": parent["owner"], "delegates": parent.get("delegates") or []} \
            if parent.get("owner") else {}
        st.plans[child.plan_id] = {**child.model_dump(mode="python", exclude={"plan_id"}),
                                   "next_sequence": 1, **owned}
        _insert_decision(st, writes.child_root)
        _insert_decision(st, intervention)
        return [intervention, writes.child_root]


class MemoryDeadLetters:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def keep(self, letters: Sequence[DeadLetter]) -> None:
        for dl in letters:
            self._db.state.dead_letters.setdefault(dl.id, dl)

    async def get(self, dead_letter_id: str) -> DeadLetter | None:
        return self._db.state.dead_letters.get(dead_letter_id)

    async def list(self, plan_id: str | None = None, limit: int = 100, *,
                   rule: str | None = None, discarded: bool = False) -> list[DeadLetter]:
        found = [d for d in self._db.state.dead_letters.values()
                 if (plan_id is None or d.plan_id == plan_id)
                 and (d.discarded_at is not None) == discarded
                 and (rule is None or (d.errors and d.errors[0].rule == rule))]
        return sorted(found, key=lambda d: d.rejected_at, reverse=True)[:limit]

    async def delete(self, dead_letter_id: str) -> bool:
        return self._db.state.dead_letters.pop(dead_letter_id, None) is not None


# --- invariants ------------------------------------------------------------------------


class MemoryInvariants:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, inv: Invariant) -> None:
        held = self._db.state.invariants
        same = next((i for i in held.values() if (i.name, i.scope, i.scope_target)
                     == (inv.name, inv.scope, inv.scope_target)), None)
        if same is not None:
            if same.id == inv.id:
                return  # the same invariant added again (a retry)
            raise DuplicateInvariant(inv.name, inv.scope, inv.scope_target, same.id)
        if inv.id in held:
            raise DuplicateInvariant(inv.name, inv.scope, inv.scope_target, None)
        held[inv.id] = inv

    async def get(self, invariant_id: str) -> Invariant | None:
        return self._db.state.invariants.get(invariant_id.upper())

    async def require(self, invariant_id: str) -> Invariant:
        inv = await self.get(invariant_id)
        if inv is None:
            raise InvariantNotFound(invariant_id)
        return inv

    async def find(self, scope: InvariantScope | None = None,
                   scope_target: str | None = None) -> list[Invariant]:
        found = [i for i in self._db.state.invariants.values()
                 if (scope is None or i.scope is scope)
                 and (scope_target is None or i.scope_target == scope_target)]
        return sorted(found, key=lambda i: (i.name, i.scope.value, i.created_at))

    async def remove(self, invariant_id: str) -> Invariant:
        inv = self._db.state.invariants.pop(invariant_id.upper(), None)
        if inv is None:
            raise InvariantNotFound(invariant_id)
        return inv

    async def inputs_for(self, plan_ids: Iterable[str] = (), projects: Iterable[str] = (),
                         action_templates: Iterable[str] = ()) -> list[Invariant]:
        targets = {InvariantScope.PLAN: {p.upper() for p in plan_ids},
                   InvariantScope.PROJECT: set(projects),
                   InvariantScope.ACTION: set(action_templates)}
        return [i for i in self._db.state.invariants.values()
                if i.scope is InvariantScope.GLOBAL
                or i.scope_target in targets.get(i.scope, set())]


class MemoryViolations:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, violation_id: str) -> InvariantViolation | None:
        return self._db.state.violations.get(violation_id.upper())

    async def require(self, violation_id: str) -> InvariantViolation:
        v = await self.get(violation_id)
        if v is None:
            raise ViolationNotFound(violation_id)
        return v

    async def find(self, plan_id: str | None = None, *, unresolved_only: bool = False,
                   limit: int = 1000) -> list[InvariantViolation]:
        found = [v for v in self._db.state.violations.values()
                 if (plan_id is None or v.plan_id == plan_id.upper())
                 and (not unresolved_only or v.resolved_at is None)]
        return sorted(found, key=lambda v: v.reported_at)[:limit]

    async def blocked_plans(self, plan_ids: Iterable[str]) -> set[str]:
        return set(_blocking(self._db.state, plan_ids))

    async def record(self, v: InvariantViolation, event_for: EventFor, now: datetime) -> bool:
        held = self._db.state.violations.get(v.violation_id)
        if held is not None:
            if held.report_fields() != v.report_fields():
                raise ViolationConflict(v.violation_id)
            return False

        def write(st: State) -> None:
            st.violations[v.violation_id] = v
            _add_events(st, v.violation_id, 0, [event_for(v, bool(_blocking(st, [v.plan_id])))],
                        now)
        self._db.transaction(write)
        return True

    async def resolve(self, violation_id: str, resolved_by: str | None, at: datetime,
                      event_for: EventFor, signature: Signature | None = None
                      ) -> InvariantViolation:
        vid = violation_id.upper()
        held = await self.require(vid)
        if held.resolved_at is not None:
            raise ViolationAlreadyResolved(held)
        done = held.model_copy(update={"resolved_at": at, "resolved_by": resolved_by,
                                       "resolution_signature": signature})

        def write(st: State) -> None:
            st.violations[vid] = done
            _add_events(st, vid, 1, [event_for(done, bool(_blocking(st, [done.plan_id])))], at)
        self._db.transaction(write)
        return done


# --- the stores ------------------------------------------------------------------------


class MemoryStore:
    """Every repository over one Database: a CorrectionStorePort, an InvariantStorePort
    and the read port (LedgerReads; its views are tests/memory_views.py), plus what the
    tests need to set a scene (`load_plan`)."""

    def __init__(self, lease_seconds: float = 10.0) -> None:
        self.db = Database()
        self.decisions = MemoryDecisions(self.db)
        self.plans = MemoryPlans(self.db)
        self.corrections = MemoryCorrections(self.db)
        self.attempts = MemoryAttempts(self.db)
        self.outbox = MemoryOutbox(self.db)
        self.leases = MemoryLeases(self.db, lease_seconds)
        self.impact = MemoryImpact(self.db)
        self.writer = MemoryWriter(self.db, self.leases)
        self.dead_letters = MemoryDeadLetters(self.db)
        self.invariants = MemoryInvariants(self.db)
        self.violations = MemoryViolations(self.db)
        self.views = MemoryViews(self.db)
        self.upkeep = MemoryUpkeep(self.db)
        self.approvals = MemoryApprovals(self.db)

    async def status(self, now: datetime) -> LedgerStatus:
        return memory_status(self.db.state, now)

    async def load_plan(self, decisions: Sequence[Decision],
                        now: datetime | None = None) -> list[Decision]:
        """As the test loader for MongoDB: numbered 0, 1, 2, ... in list order, the
        plan's counter past them, its root on its record."""
        if not decisions:
            return []
        plan_id = decisions[0].plan_id
        numbered = [d.model_copy(update={"sequence_number": i})
                    for i, d in enumerate(decisions)]
        root = next((d for d in numbered if d.is_root), None)

        def write(st: State) -> None:
            for d in numbered:
                _insert_decision(st, d)
            doc = st.plan_doc(plan_id) or {"created_at": now or utc_now(),
                                           "status": PlanStatus.ACTIVE.value}
            doc.update(next_sequence=len(numbered),
                       root_decision_id=root.decision_id if root else None,
                       project=root.project if root else None,
                       action_template=root.action_template if root else None)
            st.plans[plan_id] = doc
        self.db.transaction(write)
        return numbered


__all__ = ["Database", "MemoryStore", "State"]


def _offers_every_port(m: MemoryStore) -> tuple[CorrectionStorePort, InvariantStorePort,
                                                RecordedDecisions, DeadLetterRecords,
                                                DeadLetterShelf, LedgerReads]:
    """Never called: mypy checks here that the memory store offers every port."""
    return m, m, m.decisions, m.dead_letters, m.dead_letters, m
