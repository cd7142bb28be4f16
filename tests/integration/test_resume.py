"""The resume contract end to end: one instruction per applied correction, delivered to a
runtime's durable subscription (also after it was down), acked only after its callback
returned; decisions after a resume go under `resume_at`; a stale branch is a typed error."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import nats
import pytest

from clients.building import new_plan_id, snapshot
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.recording_errors import StaleBranchError
from clients.resume import ResumeSubscription
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from deploy.embedded import ManagedServer
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import events, until

pytestmark = pytest.mark.e2e

WINDOW = "system: you are a coding agent\nuser: add a cache"


def at(step: str) -> object:
    """The context of a decision made from the runtime checkpoint `step`."""
    return snapshot(WINDOW, actor_state_ref=f"langgraph:thread-1:{step}")


async def record_plan(rec: DecisionRecorder) -> tuple[Decision, ...]:
    """root -> strategy (cp1) -> impl (cp2) -> spawn (cp3) of a child plan, and its root."""
    child = new_plan_id()
    root = await rec.root("Add a cache", context=at("cp0"))
    strategy = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                question="Where does the cache live?",
                                chosen_option="in-process LRU", alternatives=["redis"],
                                context=at("cp1"))
    impl = await rec.record(parent=strategy, decision_type=DecisionType.IMPLEMENTATION_CHOICE,
                            question="Which library?", chosen_option="functools.lru_cache",
                            context=at("cp2"), artifacts=["src/cache.py"])
    spawn = await rec.record(parent=impl, decision_type=DecisionType.SUBPLAN_SPAWN,
                             question="Split the tests out?", chosen_option="a test plan",
                             context=at("cp3"), downstream_plan_ids=[child])
    child_root = await rec.root("Write the cache tests", context=at("c0"), plan_id=child)
    await rec.wait_all_persisted([root, strategy, impl, spawn, child_root], timeout=20)
    return root, strategy, impl, spawn, child_root


async def apply(url: str, plan: str, target: str, mode: str, guidance: str | None):  # type: ignore[no-untyped-def]
    async with CorrectionClient.connect(url, requested_by="alice") as ops:
        cid = await ops.request(plan, target, mode, guidance)
        outcome = await ops.wait_for_outcome(cid, plan, timeout=30)
    assert outcome.to_status is CorrectionStatus.APPLIED, outcome
    return outcome


def handled(sub: ResumeSubscription, n: int) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return sub.handled == n
    return probe


async def test_a_revert_tells_the_runtime_where_to_resume_and_new_decisions_go_there(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    got: list[ResumeInstruction] = []

    async def resume(instruction: ResumeInstruction) -> None:
        got.append(instruction)

    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, impl, spawn, child_root = await record_plan(rec)
        plan = root.plan_id
        async with await rec.on_resume(resume, plan_id=plan) as sub:
            outcome = await apply(nats_server.url, plan, strategy.decision_id, "revert",
                                  "use redis")
            await until(handled(sub, 1))
        [i] = got
        assert i.mode is CorrectionMode.REVERT and i.correction_id == outcome.correction_id
        assert i.plan_id == plan and i.guidance == "use redis" and not i.guidance_defaulted
        assert i.requested_by is None  # unsigned: no principal was verified
        assert i.replacement_decision_id == outcome.new_decision_id
        assert (i.resume_at.plan_id, i.resume_at.decision_id) == (plan, outcome.new_decision_id)
        assert i.parent_decision_id == root.decision_id
        assert i.target.decision_id == strategy.decision_id
        assert i.target.actor_state_ref == "langgraph:thread-1:cp1"
        assert i.target.chosen_option == "in-process LRU"
        assert i.superseded_count == 4  # the child plan's decisions too
        assert set(i.superseded_ids) == {strategy.decision_id, impl.decision_id,
                                         spawn.decision_id, child_root.decision_id}
        assert i.child_plans_rolled_back == [child_root.plan_id]
        assert i.child_plans_rolled_back_count == 1
        assert i.archived_artifacts_path
        # "Resume me": the next decision goes under the replacement with no ID tracking.
        after = await rec.record(parent=i.resume_at, decision_type="implementation_choice",
                                 question="Which client?", chosen_option="redis-py",
                                 context=at("cp1b"))
        persisted = await rec.wait_persisted(after, timeout=20)
        assert persisted.parent_decision_id == outcome.new_decision_id
        # The runtime still on the old branch gets the typed error naming where to go.
        late = await rec.record(parent=impl, decision_type="tool_invocation",
                                question="Run the tests", chosen_option="pytest",
                                context=at("cp3"))
        with pytest.raises(StaleBranchError) as stale:
            await rec.wait_persisted(late, timeout=20)
        assert stale.value.resume_at == i.resume_at
        assert stale.value.correction_id == i.correction_id
        # So does one recording into the rolled-back child plan.
        child_late = await rec.record(
            parent=child_root, decision_type="tool_invocation", question="Run them",
            chosen_option="pytest", context=at("c1"))
        with pytest.raises(StaleBranchError) as rolled:
            await rec.wait_persisted(child_late, timeout=20)
        assert rolled.value.correction_id == i.correction_id
    stored = await events(nc, f"corrections.resume.{plan}", 0.5)
    assert [m[2]["Nats-Msg-Id"] for m in stored] == [f"resume:{outcome.correction_id}"]


async def test_an_append_tells_the_runtime_to_start_the_child_plan(
        workers: InProcessWorkers, nats_server: ManagedServer) -> None:
    got: list[ResumeInstruction] = []

    async def resume(instruction: ResumeInstruction) -> None:
        got.append(instruction)

    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, _strategy, impl, *_ = await record_plan(rec)
        plan = root.plan_id
        async with await rec.on_resume(resume, plan_ids=[plan], durable="runtime-a") as sub:
            outcome = await apply(nats_server.url, plan, impl.decision_id, "append",
                                  "also cache negative lookups")
            await until(handled(sub, 1))
        [i] = got
        assert i.mode is CorrectionMode.APPEND
        [child] = outcome.child_plans_spawned
        assert i.child_plan_id == child and i.resume_plan_id == child
        assert i.resume_at.plan_id == child and i.resume_at.decision_id == i.child_root_decision_id
        assert i.intervention_decision_id == outcome.new_decision_id
        assert i.guidance == "also cache negative lookups"
        assert i.target.actor_state_ref == "langgraph:thread-1:cp2"
        assert i.replacement_decision_id is None and i.superseded_count == 0
        first = await rec.record(parent=i.resume_at, decision_type="implementation_choice",
                                 question="How?", chosen_option="a sentinel value",
                                 context=at("n1"))
        persisted = await rec.wait_persisted(first, timeout=20)
        assert (persisted.plan_id, persisted.parent_decision_id) == (child,
                                                                    i.child_root_decision_id)


async def test_an_instruction_published_while_the_runtime_was_down_arrives_once(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    got: list[str] = []
    fail_first = [True]

    async def resume(instruction: ResumeInstruction) -> None:
        if fail_first[0]:  # the first delivery fails: it comes back, and is acked after
            fail_first[0] = False
            raise RuntimeError("checkpoint store not ready")
        got.append(instruction.correction_id)

    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, *_ = await record_plan(rec)
        plan = root.plan_id
        sub = await rec.on_resume(resume, plan_id=plan, backoff=[0.2])
        await sub.stop()  # the runtime goes down; its durable stays
        outcome = await apply(nats_server.url, plan, strategy.decision_id, "revert", None)
        # Back up: the instruction published meanwhile arrives, fails once, then is handled.
        async with await rec.on_resume(resume, plan_id=plan, backoff=[0.2]) as again:
            await until(handled(again, 1))
        assert got == [outcome.correction_id]
        # Up once more: nothing is handed over twice.
        async with await rec.on_resume(resume, plan_id=plan, backoff=[0.2]) as third:
            await asyncio.sleep(1.0)
            assert third.handled == 0
        assert got == [outcome.correction_id]
        await third.stop(delete=True)
    info = await nc.jetstream().stream_info("CORRECTIONS")
    assert info.state.messages > 0
    stored = await events(nc, f"corrections.resume.{plan}", 0.5)
    assert len(stored) == 1
    body = stored[0][1]
    assert body["guidance_defaulted"] is True and body["guidance"].startswith("Revert of")


HOSTILE = [
    b"\xff\xfe not json",
    b"[" * 5000 + b"]" * 5000,
    b'{"correction_id": "' + b"x" * 200_000 + b'"}',
    b'{"correction_id": "01JD7X4Q9R8N2V5K3M6P1T0W7Y", "applied_at": "9999-12-31T23:59:59-23:59"}',
    b"[" + b"1," * 50_000 + b"1]",
    b"{}",
]


async def test_garbage_on_the_resume_subject_never_holds_back_an_instruction(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    got: list[str] = []

    async def resume(instruction: ResumeInstruction) -> None:
        got.append(instruction.correction_id)

    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, *_ = await record_plan(rec)
        plan = root.plan_id
        js = nc.jetstream()
        for body in HOSTILE:  # a buggy or hostile publisher, before the real instruction
            await js.publish(f"corrections.resume.{plan}", body)
        async with await rec.on_resume(resume, plan_id=plan) as sub:
            outcome = await apply(nats_server.url, plan, strategy.decision_id, "revert",
                                  "use redis")
            for body in HOSTILE:  # and after it
                await js.publish(f"corrections.resume.{plan}", body)
            await until(handled(sub, 1))
            durable = sub.durable

            async def drained() -> bool:
                info = await js.consumer_info("CORRECTIONS", durable)
                return info.num_pending == 0 and info.num_ack_pending == 0
            await until(drained)
        assert got == [outcome.correction_id]
