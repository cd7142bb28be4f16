"""Invariant storage against the real MongoDB-compatible server, and the service over it
(with a real NATS for its events)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.decisions.model import Decision
from contracts.invariants.errors import (
    DuplicateInvariant,
    InvalidInvariant,
    ViolationAlreadyResolved,
    ViolationConflict,
)
from contracts.invariants.model import SCOPE_RANK, Invariant, InvariantScope
from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import ViolationEventType
from contracts.recording.message import Candidate
from contracts.shared.ids import new_id
from contracts.shared.outgoing import OutgoingEvent
from services.archive.writer import Archive
from services.corrections.service import CorrectionService
from services.invariants import InvariantService
from services.violation_reports import violation_event
from store.correction_store import CorrectionStore
from store.database import Document
from store.errors import InvariantNotFound, ViolationNotFound
from store.invariant_store import InvariantStore
from store.invariants import InvariantRepository
from store.outbox import OutboxRepository
from store.recorder import RecorderRepository
from store.violations import ViolationRepository
from tests.bulk import load_plan
from tests.factories import root
from tests.integration.wire import events
from workers.streams import ensure_streams

pytestmark = pytest.mark.store
S = InvariantScope
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def event_for(v: InvariantViolation, blocked: bool) -> OutgoingEvent:
    return OutgoingEvent(f"invariants.events.{v.plan_id}.x", str(blocked).encode(),
                         f"violation:{v.violation_id}:{v.resolved_at is not None}")


def violation(plan_id: str, severity: Severity = Severity.ERROR) -> InvariantViolation:
    return InvariantViolation(invariant_id=new_id(), plan_id=plan_id, severity=severity,
                              details="dropped a table", reported_at=NOW)


async def test_invariants_add_find_remove_and_effective_inputs(
        db: AsyncDatabase[Document]) -> None:
    repo = InvariantRepository(db)
    plan = new_id()
    # One invariant named "x" at every scope, each aimed at this plan, plus decoys.
    mine = {s: Invariant(name="x", description=f"{s.value} x", scope=s,
                         scope_target={S.GLOBAL: None, S.PLAN: plan, S.PROJECT: "app",
                                       S.ACTION: "tpl"}[s]) for s in S}
    decoys = [Invariant(name="x", description="d", scope=S.PLAN, scope_target=new_id()),
              Invariant(name="x", description="d", scope=S.PROJECT, scope_target="zzz")]
    for i in [*mine.values(), *decoys]:
        await repo.add(i)
    await repo.add(mine[S.GLOBAL])  # the same invariant again: a retry
    with pytest.raises(DuplicateInvariant, match=mine[S.PROJECT].id):
        await repo.add(Invariant(name="x", description="again", scope=S.PROJECT,
                                 scope_target="app"))
    assert len(await repo.find()) == 6
    assert [i.id for i in await repo.find(S.PROJECT, "app")] == [mine[S.PROJECT].id]

    inputs = await repo.inputs_for([plan], ["app"], ["tpl"])
    assert {i.id for i in inputs} == {i.id for i in mine.values()}
    assert {i.id for i in await repo.inputs_for()} == {mine[S.GLOBAL].id}

    assert (await repo.remove(mine[S.ACTION].id)).scope is S.ACTION
    with pytest.raises(InvariantNotFound):
        await repo.remove(mine[S.ACTION].id)
    with pytest.raises(InvariantNotFound):
        await repo.require(new_id())


async def test_violations_recorded_once_resolved_once_and_block_only_when_error(
        db: AsyncDatabase[Document]) -> None:
    repo, outbox = ViolationRepository(db), OutboxRepository(db)
    blocked, warned = new_id(), new_id()
    err, warn = violation(blocked), violation(warned, Severity.WARNING)
    assert await repo.record(err, event_for, NOW) is True
    assert await repo.record(err.model_copy(update={"reported_at": datetime.now(UTC)}),
                             event_for, NOW) is False  # a retry, stamped later
    with pytest.raises(ViolationConflict):
        await repo.record(err.model_copy(update={"details": "other"}), event_for, NOW)
    assert await repo.record(warn, event_for, NOW) is True
    pending = await outbox.pending_for(err.violation_id)
    assert [p.message.payload for p in pending] == [b"True"]
    assert await repo.blocked_plans([blocked, warned, new_id()]) == {blocked}
    facts = await RecorderRepository(db).facts_for([
        Candidate(1, Decision.model_validate(root(p)), "h") for p in (blocked, warned)])
    assert facts.blocked_plans == {blocked: (err.violation_id,)}

    done = await repo.resolve(err.violation_id.lower(), "alice", NOW, event_for)
    assert (done.resolved_by, done.resolved_at) == ("alice", NOW)
    with pytest.raises(ViolationAlreadyResolved, match="alice"):
        await repo.resolve(err.violation_id, "bob", NOW, event_for)
    with pytest.raises(ViolationNotFound):
        await repo.resolve(new_id(), "bob", NOW, event_for)
    pending = await outbox.pending_for(err.violation_id)
    assert [p.message.payload for p in pending] == [b"True", b"False"]  # in order
    assert await repo.blocked_plans([blocked]) == set()
    assert [v.violation_id for v in await repo.find(unresolved_only=True)] == [
        warn.violation_id]
    assert len(await repo.find(blocked)) == 1


@pytest.mark.parametrize(("project", "template"), [("app", "tpl"), ("app", None),
                                                   (None, "tpl"), (None, None)])
async def test_service_effective_for_a_recorded_plan_uses_its_project_and_template(
        db: AsyncDatabase[Document], nc: nats.NATS, project: str | None,
        template: str | None) -> None:
    await ensure_streams(nc.jetstream())
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    r = Decision.model_validate(root(project=project, action_template=template))
    await load_plan(db, [r])
    for scopes in itertools.chain.from_iterable(
            itertools.combinations(list(S), n) for n in range(1, 5)):
        name = "-".join(s.value.lower() for s in scopes)
        for s in scopes:
            target = {S.GLOBAL: None, S.PLAN: r.plan_id, S.PROJECT: "app",
                      S.ACTION: "tpl"}[s]
            await svc.add_invariant(name, f"{s.value}", s, target)
    got = {i.name: i.scope for i in await svc.effective_for(r.plan_id)}
    expected = {}
    for inv in await svc.list_invariants():
        present = [S(p.upper()) for p in inv.name.split("-")]
        applicable = [s for s in present if s in (S.GLOBAL, S.PLAN)
                      or (s is S.PROJECT and project) or (s is S.ACTION and template)]
        if applicable:
            expected[inv.name] = max(applicable, key=lambda s: SCOPE_RANK[s])
    assert got == expected
    # Of the 15 names, only those made of inapplicable scopes are missing.
    missing = {n for n, given in (("project", project), ("action", template)) if not given}
    assert set(expected) == {n for n in (i.name for i in await svc.list_invariants())
                             if not set(n.split("-")) <= missing}


async def test_service_errors_and_exactly_once_events(db: AsyncDatabase[Document],
                                                      nc: nats.NATS) -> None:
    await ensure_streams(nc.jetstream())
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    with pytest.raises(InvalidInvariant, match="GLOBAL"):
        await svc.add_invariant("x", "d", S.GLOBAL, "target")
    with pytest.raises(InvariantNotFound):
        await svc.remove_invariant(new_id())
    with pytest.raises(ViolationNotFound):
        await svc.resolve_violation(new_id())
    inv = await svc.add_invariant("no-prod-deletes", "Never delete production data")
    plan = new_id()
    v = InvariantViolation(invariant_id=inv.id, plan_id=plan, severity=Severity.ERROR,
                           details="dropped users")
    with pytest.raises(InvariantNotFound):
        await svc.report_violation(v.model_copy(update={"invariant_id": new_id()}))
    await svc.report_violation(v)
    await svc.report_violation(v)
    assert await svc.blocked_plans([plan.lower()]) == {plan}
    await svc.resolve_violation(v.violation_id)
    with pytest.raises(ViolationAlreadyResolved):
        await svc.resolve_violation(v.violation_id)
    got = await events(nc, "invariants.events.>", settle=0.3)
    assert [(s, e["event_type"], e["plan_blocked"]) for s, e, _ in got] == [
        (f"invariants.events.{plan}.violated", "INVARIANT_VIOLATED", True),
        (f"invariants.events.{plan}.resolved", "INVARIANT_VIOLATION_RESOLVED", False)]
    assert await OutboxRepository(db).count() == 0


async def test_events_left_in_the_outbox_are_published_by_the_corrections_relay(
        db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    """A worker dying between the commit and the publish leaves the event in the shared
    outbox; the relay every worker runs publishes it, once."""
    await ensure_streams(nc.jetstream())
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    inv = await svc.add_invariant("no-prod-deletes", "Never delete production data")
    v = InvariantViolation(invariant_id=inv.id, plan_id=new_id(), severity=Severity.ERROR,
                           details="dropped users")
    # What report_violation commits, without its publish (the process "died" there).
    await ViolationRepository(db).record(
        v, violation_event(ViolationEventType.INVARIANT_VIOLATED, inv.name), NOW)
    relay = CorrectionService(CorrectionStore.open(db), JetStreamPublisher(nc),
                              Archive(tmp_path / "archive"))
    assert await relay.relay() == 1
    await svc.report_violation(v)  # the redelivered report: stored already, nothing pending
    got = await events(nc, "invariants.events.>", settle=0.3)
    assert [h["Nats-Msg-Id"] for _, _, h in got] == [f"violation:{v.violation_id}:violated"]
    assert await OutboxRepository(db).count() == 0
