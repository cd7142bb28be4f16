"""The invariant and recorder services over the in-memory store: no servers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from contracts.shared.ids import new_id
from contracts.shared.inbound import Inbound
from services.invariants import InvariantService
from services.recorder import RecorderService
from services.recorder_policy import Verdict
from tests.factories import encode, headers, plan_tree, subject
from tests.memory_store import MemoryStore
from tests.port_wrappers import Published

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


async def test_a_violation_is_announced_once_blocks_and_is_resolved() -> None:
    m, published = MemoryStore(), Published()
    svc = InvariantService.from_store(m, published)
    inv = await svc.add_invariant("tests-pass", "every test passes before a merge")
    plan = new_id()
    v = InvariantViolation(violation_id=new_id(), invariant_id=inv.id, plan_id=plan,
                           decision_id=None, severity=Severity.ERROR, details="3 failed",
                           reported_at=NOW)
    await svc.report_violation(v)
    await svc.report_violation(v)  # a redelivery
    assert len(published.on("invariants.events.")) == 1
    assert await svc.blocked_plans([plan]) == {plan}
    done = await svc.resolve_violation(v.violation_id)
    assert done.resolved_by is None and await svc.blocked_plans([plan]) == set()
    assert len(published.on("invariants.events.")) == 2
    assert await m.outbox.count() == 0


async def test_the_recorder_numbers_a_batch_and_dead_letters_what_it_cannot_read() -> None:
    m, published = MemoryStore(), Published()
    recorder = RecorderService(m.decisions, m.dead_letters, published)
    tree = plan_tree(5, seed=3)
    batch = [Inbound(subject(d), headers(d), encode(d), i + 1) for i, d in enumerate(tree)]
    batch.append(Inbound(f"decisions.recorded.{tree[0]['plan_id']}", {}, b"{", 99))
    verdicts = await recorder.record(batch)
    assert [verdicts[i + 1].verdict for i in range(5)] == [Verdict.ACK] * 5
    assert verdicts[99].verdict is Verdict.TERM
    stored = await m.decisions.in_sequence(tree[0]["plan_id"])
    assert [d.sequence_number for d in stored] == list(range(5))
    assert len(published.on("decisions.persisted.")) == 5
    assert len(published.on("decisions.rejected.")) == 1
    assert [d.id for d in await m.dead_letters.list()] == ["DECISIONS:99"]
    # A redelivery of the same messages stores nothing new and acks them.
    again = await recorder.record([Inbound(b.subject, b.headers, b.data, b.stream_sequence, 2)
                                   for b in batch[:5]])
    assert {d.verdict for d in again.values()} == {Verdict.ACK}
    assert len(await m.decisions.in_sequence(tree[0]["plan_id"])) == 5
