"""After every attack: the ledger works for the principals it belongs to. An agent records
a plan, an operator in scope dry-runs and requests a revert that ends APPLIED, the
agent's runtime is told where to resume through its own durable, the subscriber's own
durable hears the outcome, the workers are ready and no durable of theirs was touched,
and nats-server refused nothing these did."""

from __future__ import annotations

import asyncio

import pytest

from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.subscriber import outcomes
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.types import DecisionType
from tests.attack.deployment import Deployment
from tests.integration.test_consumer_watch import ready

pytestmark = pytest.mark.attack

WINDOW = "system: you are a billing agent\nuser: refund the duplicate charge"


async def test_an_operators_revert_still_ends_applied(deployment: Deployment) -> None:
    before = len(deployment.violations())
    pager = await deployment.connect("pager")
    feed = outcomes(pager, durable="pager-outcomes", statuses=["applied", "failed"], limit=1)
    await feed.open()
    resumed: asyncio.Queue[ResumeInstruction] = asyncio.Queue()

    async def on_resume(instruction: ResumeInstruction) -> None:
        await resumed.put(instruction)

    try:
        async with DecisionRecorder.connect(
                deployment.url, credentials=deployment.credentials("billing-agent")) as rec:
            root = await rec.root("Refund duplicate charges", context=WINDOW,
                                  project="billing")
            strategy = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                        question="Refund how?", chosen_option="By hand",
                                        context=WINDOW)
            await rec.wait_all_persisted([root, strategy], timeout=30)
            runtime = await rec.on_resume(on_resume, plan_id=root.plan_id)
            assert runtime.durable == "resume_billing-agent"
            async with CorrectionClient.connect(
                    deployment.url, requested_by="alice",
                    credentials=deployment.credentials("alice")) as ops:
                report = await ops.dry_run(root.plan_id, strategy.decision_id, "revert",
                                           "Use the Stripe API")
                assert report.decisions_to_invalidate == [strategy.decision_id]
                cid = await ops.request(root.plan_id, strategy.decision_id, "revert",
                                        "Use the Stripe API", chosen_option="Stripe API")
                outcome = await ops.wait_for_outcome(cid, root.plan_id, timeout=60)
            assert outcome.to_status is CorrectionStatus.APPLIED
            instruction = await asyncio.wait_for(resumed.get(), 30)
            assert instruction.correction_id == cid
            await runtime.stop(delete=True)
        async with asyncio.timeout(30):
            got = [e async for e in feed]
        assert [(e.correction_id, e.to_status) for e in got] == [(cid, CorrectionStatus.APPLIED)]
    finally:
        await pager.close()
    await ready(deployment.health)
    assert deployment.violations()[before:] == []
    assert "re-creating it" not in deployment.workers.log()
